// Click-to-zoom for the flame graph SVG, as flamegraph.pl offers: frames re-laid out from their drawn geometry.
#include "flamegraph/zoom.h"

#include <cstdio>

namespace allocscope::flamegraph {

std::string zoom_script(int width, double char_width) {
  // Zooming to [zx, zx+zw) rescales every frame and clamps it to the view: ancestors fill the width, frames
  // outside the range shrink to nothing and hide. Labels are re-cut from data-n to the new width.
  static const char kScript[] = R"JS(<script type="text/ecmascript"><![CDATA[
(function () {
  var W = %d, PAD = 10, CW = %.3f;
  var frames = [].slice.call(document.getElementsByClassName('f'));
  frames.forEach(function (g) {
    var r = g.getElementsByTagName('rect')[0];
    g.x0 = +r.getAttribute('x');
    g.w0 = +r.getAttribute('width');
    g.addEventListener('click', function () { zoom(g.x0, g.w0); });
  });
  function zoom(zx, zw) {
    var k = (W - 2 * PAD) / zw;
    frames.forEach(function (g) {
      var r = g.getElementsByTagName('rect')[0], t = g.getElementsByTagName('text')[0];
      var x1 = Math.max(PAD, Math.min(W - PAD, (g.x0 - zx) * k + PAD));
      var x2 = Math.max(PAD, Math.min(W - PAD, (g.x0 + g.w0 - zx) * k + PAD));
      if (x2 - x1 < 0.1) { g.style.display = 'none'; return; }
      g.style.display = '';
      r.setAttribute('x', x1.toFixed(2));
      r.setAttribute('width', (x2 - x1).toFixed(2));
      t.setAttribute('x', (x1 + 3).toFixed(2));
      var name = g.getAttribute('data-n'), fit = Math.floor((x2 - x1) / CW);
      t.textContent = fit < 3 ? '' : (name.length > fit ? name.slice(0, fit - 2) + '..' : name);
    });
  }
  document.getElementById('reset').addEventListener('click', function () { zoom(PAD, W - 2 * PAD); });
})();
]]></script>
)JS";
  char buf[sizeof kScript + 64];
  std::snprintf(buf, sizeof buf, kScript, width, char_width);
  return buf;
}

}  // namespace allocscope::flamegraph
