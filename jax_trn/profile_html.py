"""A self-contained HTML report of one execution's profile: the timeline (a track per engine and
DMA queue, drawn as SVG by the page's script from the data embedded in it), MFU/HFU/MBU, what to
fix first, engine utilization, the top ops and source lines, and HBM traffic. No network, no
external files: one .html that any browser opens.

The timeline keeps the page small for long executions: consecutive instructions of one track
and one op closer than a pixel of the full-width picture become one slice.
"""

from __future__ import annotations

import html
import json
import os

from jax_trn import profile_advice

# Slices per track at most, before merging neighbours (about one per pixel of a wide screen).
_PIXELS = 4000
# Ops given their own colour in the timeline (the rest share grey), most busy first.
_COLOURED_OPS = 12
_PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
            "#ff9da7", "#9c755f", "#2f4b7c", "#a05195", "#665191")
_OTHER = "#bab0ac"

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; margin: 8px 0 20px; }
td, th { padding: 2px 10px; text-align: right; border-bottom: 1px solid #eee; }
td.text, th.text { text-align: left; }
.metric { display: inline-block; margin-right: 28px; font-size: 22px; }
.metric small { display: block; font-size: 12px; color: #666; }
.bar { display: inline-block; height: 10px; background: #4e79a7; vertical-align: middle; }
#timeline { width: 100%; border: 1px solid #ddd; }
li { margin: 4px 0; }
"""

# Draws the timeline: one <g class="track" data-track=NAME> per stream with a <rect> per slice.
_SCRIPT = """
const data = JSON.parse(document.getElementById("timeline-data").textContent);
const svg = document.getElementById("timeline");
const ns = "http://www.w3.org/2000/svg";
const label = 90, width = 1600, row = 22, total = Math.max(data.device_time_ns, 1e-9);
svg.setAttribute("viewBox", `0 0 ${label + width} ${row * data.tracks.length + 20}`);
data.tracks.forEach((track, i) => {
  const g = document.createElementNS(ns, "g");
  g.setAttribute("class", "track");
  g.setAttribute("data-track", track.name);
  const text = document.createElementNS(ns, "text");
  text.setAttribute("x", 4); text.setAttribute("y", i * row + 15);
  text.textContent = track.name;
  g.appendChild(text);
  for (const [start, dur, op] of track.slices) {
    const rect = document.createElementNS(ns, "rect");
    rect.setAttribute("x", label + width * start / total);
    rect.setAttribute("y", i * row + 3);
    rect.setAttribute("width", Math.max(width * dur / total, 0.5));
    rect.setAttribute("height", row - 6);
    rect.setAttribute("fill", data.colours[op]);
    const tip = document.createElementNS(ns, "title");
    tip.textContent = `${data.ops[op]}: ${(start / 1e3).toFixed(2)} us + ${(dur / 1e3).toFixed(3)} us`;
    rect.appendChild(tip);
    g.appendChild(rect);
  }
  svg.appendChild(g);
});
const axis = document.createElementNS(ns, "text");
axis.setAttribute("x", label); axis.setAttribute("y", row * data.tracks.length + 15);
axis.textContent = `0 .. ${(total / 1e3).toFixed(2)} us (modeled)`;
svg.appendChild(axis);
"""


def _e(value) -> str:
  return html.escape(str(value))


def _timeline_data(profile, ops) -> dict:
  """Tracks of merged slices [start_ns, duration_ns, op index] and the op names and colours."""
  names = [o.key for o in ops[:_COLOURED_OPS]] + ["other ops"]
  colour_of = {debug_id: i for i, o in enumerate(ops[:_COLOURED_OPS]) for debug_id in o.debug_ids}
  merge_gap = profile.device_time_ns / _PIXELS
  tracks = []
  for name, records in profile.tracks():
    slices: list[list] = []
    for r in records:
      start, end = r["start_ns"], r.get("busy_end_ns", r["end_ns"])
      op = colour_of.get(r["debug_id"], len(names) - 1)
      last = slices[-1] if slices else None
      if last is not None and last[2] == op and start - (last[0] + last[1]) <= merge_gap:
        last[1] = max(last[1], end - last[0])
      else:
        slices.append([start, end - start, op])
    tracks.append({"name": name,
                   "slices": [[round(a, 3), round(b, 3), c] for a, b, c in slices]})
  colours = list(_PALETTE[:len(names) - 1]) + [_OTHER]
  return {"device_time_ns": profile.device_time_ns, "tracks": tracks, "ops": names,
          "colours": colours}


def _op_rows(rows, all_busy: float, top: int) -> str:
  out = ["<tr><th>us busy</th><th>% busy</th><th>engine</th><th>MFU</th><th>HFU</th>"
         "<th>MBU</th><th>HBM MB</th><th>GFLOP</th><th class=text>bottleneck</th>"
         "<th class=text>lowering</th><th class=text>op / line</th><th class=text>at / ops</th>"
         "</tr>"]
  for o in rows[:top]:
    u = o.utilization
    out.append(
        f"<tr><td>{o.busy_ns / 1e3:.2f}</td><td>{100 * o.busy_ns / all_busy:.1f}</td>"
        f"<td>{_e(o.engine)}</td><td>{100 * u.mfu:.1f} %</td><td>{100 * u.hfu:.1f} %</td>"
        f"<td>{100 * u.mbu:.1f} %</td><td>{o.hbm_bytes / 1e6:.3f}</td>"
        f"<td>{o.flops / 1e9:.3f}</td><td class=text title=\"{_e(o.why)}\">{_e(o.bottleneck)}</td>"
        f"<td class=text>{_e(o.lowering or '-')}</td><td class=text>{_e(o.key)}</td>"
        f"<td class=text>{_e(o.location if o.op and o.key != o.location else o.op)}</td></tr>")
  return "<table>" + "".join(out) + "</table>"


def _engine_rows(profile) -> str:
  total = max(profile.device_time_ns, 1e-9)
  out = ["<tr><th class=text>stream</th><th>busy us</th><th>utilization</th><th></th>"
         "<th>semaphore wait us</th><th>idle us</th><th class=text>waited on</th></tr>"]
  for name, a in profile.stream_activity().items():
    waited = ", ".join(f"{s} {ns / 1e3:.2f} us" for s, ns in
                       sorted(a.waited_on.items(), key=lambda kv: -kv[1])[:3])
    share = a.busy_ns / total
    out.append(f"<tr><td class=text>{_e(name)}</td><td>{a.busy_ns / 1e3:.2f}</td>"
               f"<td>{100 * share:.1f} %</td><td class=text><span class=bar "
               f"style=\"width:{min(share, 1) * 200:.0f}px\"></span></td>"
               f"<td>{a.semaphore_wait_ns / 1e3:.2f}</td><td>{a.idle_ns / 1e3:.2f}</td>"
               f"<td class=text>{_e(waited)}</td></tr>")
  return "<table>" + "".join(out) + "</table>"


def render(profile, top: int = 15) -> str:
  """The report as one HTML document."""
  ops = profile.by_op()
  lines = profile.by_line()
  peak = profile.peak()
  u = profile.device_utilization()
  all_busy = max(sum(t.busy_ns for t in profile.streams.values()), 1e-9)
  timeline = _timeline_data(profile, ops)
  data = json.dumps(timeline, separators=(",", ":")).replace("</", "<\\/")
  legend = "".join(f'<span style="color:{c}">&#9632;</span> {_e(n)} &nbsp; '
                   for n, c in zip(timeline["ops"], timeline["colours"]))
  advice = profile_advice.fix_first(profile, top=5)
  target = profile.target or "trn2"
  gb_per_s = profile.hbm_bytes / max(profile.device_time_ns, 1e-9)
  hbm_ops = sorted((o for o in ops if o.hbm_bytes), key=lambda o: -o.hbm_bytes)[:top]
  hbm_rows = "".join(
      f"<tr><td>{o.hbm_bytes / 1e6:.3f}</td><td>{100 * o.hbm_bytes / max(profile.hbm_bytes, 1):.1f}"
      f"</td><td>{o.hbm_bytes / max(o.dma_active_ns or o.active_ns, 1e-9):.1f}</td>"
      f"<td class=text>{_e(o.key)}</td><td class=text>{_e(o.location)}</td></tr>"
      for o in hbm_ops)
  metrics = "".join(
      f"<span class=metric>{value}<small>{_e(caption)}</small></span>" for value, caption in (
          (f"{profile.device_time_ns / 1e3:.2f} us", "modeled device time"),
          (f"{100 * u.mfu:.1f} %", "MFU (model FLOPs / bf16 peak)"),
          (f"{100 * u.hfu:.1f} %", "HFU (+ transposes)"),
          (f"{100 * u.mbu:.1f} %", "MBU (HBM bytes / HBM peak)")))
  return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>trn profile: device {profile.device_id} ({_e(target)})</title>
<style>{_STYLE}</style></head><body>
<h1>trn device {profile.device_id} ({_e(target)}), one execution</h1>
<p>Times are the jax-trn timing model's estimates, not measurements. Peak of the device:
{peak.physical_cores} NeuronCore(s), {peak.tflops:.1f} bf16 TFLOPS, {peak.hbm_bytes_per_ns:.0f}
GB/s HBM (docs/profiling.md).</p>
<div>{metrics}</div>
<h2>What to fix first</h2>
<ol id="fix-first">{"".join(f"<li>{_e(a.format())}</li>" for a in advice)
                    or "<li>No op accounts for a notable share of the critical path.</li>"}</ol>
<h2>Timeline</h2>
<svg id="timeline" xmlns="http://www.w3.org/2000/svg" role="img"
 aria-label="instructions per engine and DMA queue over the device time"></svg>
<p>{legend}</p>
<h2>Engine utilization</h2>
{_engine_rows(profile)}
<h2>Top ops</h2>
{_op_rows(ops, all_busy, top)}
<h2>Top source lines</h2>
{_op_rows(lines, all_busy, top)}
<h2>HBM traffic</h2>
<p>{profile.hbm_bytes / 1e6:.3f} MB read and written, {gb_per_s:.1f} GB/s over the execution
({100 * u.mbu:.1f} % of {peak.hbm_bytes_per_ns:.0f} GB/s).</p>
<table><tr><th>MB</th><th>% of traffic</th><th>GB/s while its DMA ran</th>
<th class=text>op</th><th class=text>at</th></tr>{hbm_rows}</table>
<script type="application/json" id="timeline-data">{data}</script>
<script>{_SCRIPT}</script>
</body></html>
"""


def write(profile, path: str | os.PathLike) -> None:
  with open(path, "w", encoding="utf-8") as f:
    f.write(render(profile))
