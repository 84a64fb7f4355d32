// The list of views: each is one module exporting {id, title, key, available(state), mount(root, ctx)}; mount returns
// {update(patch), destroy()}. The app shows those whose `available` says yes, in this order. A view with perDevice
// shows one device's trace: on a device without one the app shows a message instead of mounting it.
import overview from './overview.js';
import timeline, { timelineView } from './timeline.js';
import state from './state.js';
import flame from './flame.js';
import peak from './peak.js';
import leaks from './leaks.js';
import oom from './oom.js';
import diff from './diff.js';
import ranks from './ranks.js';
import whatif from './whatif.js';

export const views = [overview, timeline, timelineView('segments'), state, flame, peak, leaks, oom, whatif, diff, ranks];
