"""Suite-wide test settings.

Hypothesis keeps no example database and its storage folder lives in the system temp folder:
by default it writes `.hypothesis/` into the working folder, and tests must write nothing into
the checkout.
"""

import tempfile

from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

set_hypothesis_home_dir(tempfile.mkdtemp(prefix="trustbench-hypothesis-"))
settings.register_profile("trustbench", database=None)
settings.load_profile("trustbench")
