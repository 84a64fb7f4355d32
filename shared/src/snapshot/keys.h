// The dict keys of the snapshot format, interned once so field dispatch compares 32-bit ids, not strings.
#pragma once

#include "allocscope/snapshot.h"

namespace allocscope::detail {

struct Keys {
  explicit Keys(StringTable* t)
      : action(t->intern("action")), addr(t->intern("addr")), size(t->intern("size")), stream(t->intern("stream")),
        time_us(t->intern("time_us")), frames(t->intern("frames")), compile_context(t->intern("compile_context")),
        user_metadata(t->intern("user_metadata")), device_free(t->intern("device_free")), name(t->intern("name")),
        filename(t->intern("filename")), line(t->intern("line")), segments(t->intern("segments")),
        device_traces(t->intern("device_traces")), allocator_settings(t->intern("allocator_settings")),
        external_annotations(t->intern("external_annotations")), device(t->intern("device")),
        address(t->intern("address")), total_size(t->intern("total_size")),
        allocated_size(t->intern("allocated_size")), active_size(t->intern("active_size")),
        requested_size(t->intern("requested_size")), segment_type(t->intern("segment_type")),
        segment_pool_id(t->intern("segment_pool_id")), is_expandable(t->intern("is_expandable")),
        blocks(t->intern("blocks")), state(t->intern("state")), stage(t->intern("stage")),
        history(t->intern("history")), real_size(t->intern("real_size")),
        allocscope_outside(t->intern("allocscope_outside")), forward_frames(t->intern("forward_frames")),
        host_segments(t->intern("host_segments")), host_traces(t->intern("host_traces")),
        fx_node_op(t->intern("fx_node_op")), fx_node_name(t->intern("fx_node_name")),
        fx_node_target(t->intern("fx_node_target")), fx_original_trace(t->intern("fx_original_trace")),
        allocscope_lent(t->intern("allocscope_lent")) {}

  StringId action, addr, size, stream, time_us, frames, compile_context, user_metadata, device_free, name, filename,
      line, segments, device_traces, allocator_settings, external_annotations, device, address, total_size,
      allocated_size, active_size, requested_size, segment_type, segment_pool_id, is_expandable, blocks, state,
      stage, history, real_size, allocscope_outside, forward_frames, host_segments, host_traces, fx_node_op,
      fx_node_name, fx_node_target, fx_original_trace, allocscope_lent;
};

}  // namespace allocscope::detail
