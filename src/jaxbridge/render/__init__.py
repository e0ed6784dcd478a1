"""Videos of MuJoCo trajectories on a machine without a display.

`use_headless_gl()` picks the OpenGL backend MuJoCo renders with (EGL, then OSMesa) before
MuJoCo is imported; `frames(env, trajectory)` renders a Playground environment's States
(jaxbridge's or MJX's, a list or one State with a leading time axis) with Playground's own
`env.render`; `write_gif(frames, path)` saves them. Importing this module imports neither
MuJoCo nor an OpenGL library.
"""

from ._gl import GLUnavailableError as GLUnavailableError
from ._gl import use_headless_gl as use_headless_gl
from ._video import frames as frames
from ._video import write_gif as write_gif
