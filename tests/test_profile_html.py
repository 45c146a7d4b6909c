"""The HTML profile report: self-contained, written by to_html() and by `jax-trn profile`, and
rendered by a real headless browser whose DOM shows the page's script drew a slice for every
engine and DMA queue that ran instructions."""

import html.parser
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_trn import cli, profile

_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _browser() -> str | None:
  return next((path for path in map(shutil.which, _BROWSERS) if path), None)


def _layer(a, b):
  return jax.nn.gelu(a @ b) + 1.0


@pytest.fixture(scope="module")
def traced(trn):
  rng = np.random.default_rng(0)
  a = jax.device_put(rng.standard_normal((256, 512), dtype=np.float32), trn)
  b = jax.device_put(rng.standard_normal((512, 256), dtype=np.float32), trn)
  with profile.trace():
    jax.jit(_layer)(a, b).block_until_ready()
  return profile.last_execution(trn)


class _Tracks(html.parser.HTMLParser):
  """The timeline's tracks in a DOM: {data-track: [(x, width) of each rect]}."""

  def __init__(self):
    super().__init__()
    self.tracks: dict[str, list[tuple[float, float]]] = {}
    self._current = None

  def handle_starttag(self, tag, attrs):
    attrs = dict(attrs)
    if tag == "g" and attrs.get("class") == "track":
      self._current = self.tracks.setdefault(attrs["data-track"], [])
    elif tag == "rect" and self._current is not None:
      self._current.append((float(attrs["x"]), float(attrs["width"])))

  def handle_endtag(self, tag):
    if tag == "g":
      self._current = None


def test_report_is_self_contained(traced, tmp_path):
  path = tmp_path / "report.html"
  traced.to_html(path)
  text = path.read_text()
  assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
  assert "https://" not in text and "<link" not in text and "src=" not in text
  for section in ("What to fix first", "Timeline", "Engine utilization", "Top ops",
                  "Top source lines", "HBM traffic", "MFU", "HFU", "MBU"):
    assert section in text
  assert "test_profile_html.py" in text  # the source lines
  # As written the SVG is empty: the page's script draws it, in the browser.
  unrendered = _Tracks()
  unrendered.feed(text)
  assert unrendered.tracks == {} and "<rect" not in text


def test_report_needs_the_timeline(trn):
  x = jax.device_put(np.ones((8, 8), np.float32), trn)
  jax.jit(lambda v: v + 1)(x).block_until_ready()
  with pytest.raises(ValueError, match="profile.trace"):
    profile.last_execution(trn).to_html("unused.html")


@pytest.mark.skipif(_browser() is None, reason="no Chromium/Chrome binary on PATH")
def test_headless_browser_draws_every_track(traced, tmp_path):
  path = tmp_path / "report.html"
  traced.to_html(path)
  dom = subprocess.run(
      [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
       path.as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout
  parser = _Tracks()
  parser.feed(dom)
  streams = [name for name, _ in traced.tracks()]
  assert list(parser.tracks) == streams
  for name, rects in parser.tracks.items():
    assert rects, f"no slice drawn for {name}"
    assert all(x >= 90 and width > 0 for x, width in rects), name
  # The slices are laid out over the device time: the last reaches the right part of the picture.
  assert max(x + w for rects in parser.tracks.values() for x, w in rects) > 90 + 1600 * 0.9


def test_cli_profiles_a_script_and_writes_the_report(tmp_path, capsys):
  script = tmp_path / "step.py"
  script.write_text(
      "import sys\n"
      "import jax, jax.numpy as jnp, numpy as np\n"
      "x = jax.device_put(np.ones((128, 128), np.float32), jax.devices('trn')[0])\n"
      "jax.jit(lambda v: jnp.tanh(v @ v))(x).block_until_ready()\n"
      "print('argv', sys.argv[1:])\n")
  out_html = tmp_path / "step.html"
  assert cli.main(["profile", "--html", str(out_html), str(script), "--steps", "3"]) == 0
  out = capsys.readouterr().out
  assert "argv ['--steps', '3']" in out and "MFU" in out and "what to fix first" in out
  assert "stablehlo.dot_general" in out_html.read_text()
  assert sys.argv[0] != str(script)
