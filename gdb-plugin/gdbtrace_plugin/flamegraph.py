"""A flame graph as one self-contained SVG (no gdb import, no network, no
third-party script): the call paths of stacks.StackCounts (or a folded file)
as a tree, root at the bottom, each box as wide as the frames under it.
Hover shows the count and share, click zooms into a box, "Reset zoom" (or a
click on the root) goes back. Written here from scratch; the look follows the
flame graphs people know from Brendan Gregg's tool."""

import html
import zlib

WIDTH = 1200
ROW = 17
PAD_TOP = 40
PAD_BOTTOM = 20
PAD_SIDE = 10
CHAR_PX = 7.0  # approximate width of one character at font-size 12 (monospace-ish)

_SCRIPT = r"""
var boxes = Array.prototype.slice.call(document.querySelectorAll('g.f'));
var W = %(inner)d, X0 = %(left)d;
function fit(g, px) {
  var t = g.querySelector('text'), name = g.getAttribute('data-name');
  var n = Math.floor((px - 6) / %(char)s);
  t.textContent = n < 3 ? '' : (name.length <= n ? name : name.substring(0, n - 2) + '..');
}
function place(g, x, w) {
  var r = g.querySelector('rect'), t = g.querySelector('text');
  r.setAttribute('x', X0 + x * W); r.setAttribute('width', Math.max(0, w * W - 1));
  t.setAttribute('x', X0 + x * W + 3); fit(g, w * W);
}
function zoom(g) {
  var z0 = +g.getAttribute('data-x'), z1 = z0 + +g.getAttribute('data-w');
  var zd = +g.getAttribute('data-d');
  boxes.forEach(function (b) {
    var x = +b.getAttribute('data-x'), w = +b.getAttribute('data-w'), d = +b.getAttribute('data-d');
    if (d < zd && x <= z0 + 1e-12 && x + w >= z1 - 1e-12) {
      b.style.display = ''; b.style.opacity = 0.6; place(b, 0, 1);
    } else if (d >= zd && x >= z0 - 1e-12 && x + w <= z1 + 1e-12) {
      b.style.display = ''; b.style.opacity = 1; place(b, (x - z0) / (z1 - z0), w / (z1 - z0));
    } else {
      b.style.display = 'none';
    }
  });
  document.getElementById('reset').style.display = zd > 0 ? '' : 'none';
}
function reset() { zoom(boxes[0]); }
boxes.forEach(function (b) {
  b.addEventListener('click', function () { zoom(b); });
  place(b, +b.getAttribute('data-x'), +b.getAttribute('data-w'));
});
document.getElementById('reset').addEventListener('click', reset);
"""


def _color(name):
    """A warm colour from the name (stable between runs); markers are grey."""
    if name.startswith("["):
        return "rgb(170,170,170)"
    h = zlib.crc32(name.encode("utf-8"))
    r = 205 + h % 50
    g = 80 + (h >> 8) % 130
    b = 30 + (h >> 16) % 50
    return "rgb(%d,%d,%d)" % (r, g, b)


class _Node:
    __slots__ = ("name", "count", "children")

    def __init__(self, name):
        self.name, self.count, self.children = name, 0, {}


def build_tree(paths):
    """PATHS: [(names outermost first, count)] -> the root node ("all")."""
    root = _Node("all")
    for names, count in paths:
        root.count += count
        node = root
        for name in names:
            node = node.children.setdefault(name, _Node(name))
            node.count += count
    return root


def render_svg(paths, title="Flame graph"):
    """The SVG document (str) for PATHS: [(names outermost first, count)]."""
    root = build_tree(paths)
    total = root.count or 1
    boxes = []  # (depth, x fraction, width fraction, node)

    def walk(node, depth, x):
        boxes.append((depth, x, node.count / total, node))
        for child in sorted(node.children.values(), key=lambda c: c.name):
            walk(child, depth + 1, x)
            x += child.count / total

    walk(root, 0, 0.0)
    depth = max(d for d, _, _, _ in boxes) + 1
    height = PAD_TOP + depth * ROW + PAD_BOTTOM
    inner = WIDTH - 2 * PAD_SIDE
    out = [
        '<?xml version="1.0" standalone="no"?>',
        '<svg version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" '
        'xmlns="http://www.w3.org/2000/svg">' % (WIDTH, height, WIDTH, height),
        '<style>text{font-family:Verdana,sans-serif;font-size:12px;fill:#000}'
        'g.f:hover rect{stroke:#000;stroke-width:0.5}g.f{cursor:pointer}'
        '#reset{cursor:pointer;fill:#06c}</style>',
        '<rect x="0" y="0" width="%d" height="%d" fill="#fdfdf6"/>' % (WIDTH, height),
        '<text x="%d" y="24" text-anchor="middle" style="font-size:17px">%s</text>'
        % (WIDTH // 2, html.escape(title)),
        '<text id="reset" x="%d" y="24" style="display:none">Reset zoom</text>' % PAD_SIDE,
        '<text x="%d" y="%d" style="font-size:11px;fill:#555">%d samples; click a box to zoom'
        '</text>' % (PAD_SIDE, height - 6, root.count),
    ]
    for d, x, w, node in boxes:
        y = height - PAD_BOTTOM - (d + 1) * ROW
        label = "%s (%d samples, %.2f%%)" % (node.name, node.count, 100.0 * node.count / total)
        px = w * inner
        n = int((px - 6) // CHAR_PX)
        text = "" if n < 3 else (node.name if len(node.name) <= n else node.name[: n - 2] + "..")
        out.append(
            '<g class="f" data-name="%s" data-x="%.12g" data-w="%.12g" data-d="%d">'
            '<title>%s</title><rect x="%.2f" y="%d" width="%.2f" height="%d" rx="2" fill="%s"/>'
            '<text x="%.2f" y="%d">%s</text></g>'
            % (html.escape(node.name, quote=True), x, w, d, html.escape(label),
               PAD_SIDE + x * inner, y, max(0.0, px - 1), ROW - 1, _color(node.name),
               PAD_SIDE + x * inner + 3, y + ROW - 5, html.escape(text)))
    out.append("<script><![CDATA[%s]]></script>" % (
        _SCRIPT % {"inner": inner, "left": PAD_SIDE, "char": CHAR_PX}))
    out.append("</svg>")
    return "\n".join(out) + "\n"
