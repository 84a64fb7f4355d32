// SingleThreaded: the thread-local switch that threads_for (util/parallel.h) reads.
#include "allocscope/threads.h"

#include "util/parallel.h"

namespace allocscope {

#if defined(__EMSCRIPTEN__)
SingleThreaded::SingleThreaded(bool) : was_(true) {}  // one thread there already
SingleThreaded::~SingleThreaded() = default;
#else
SingleThreaded::SingleThreaded(bool on) : was_(detail::t_single_threaded) { detail::t_single_threaded = was_ || on; }
SingleThreaded::~SingleThreaded() { detail::t_single_threaded = was_; }
#endif

}  // namespace allocscope
