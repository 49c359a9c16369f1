"""The runtime tests' scripted model and runtime (the run's spans), the providers' gateway starter (its spans)."""

from ..providers.conftest import gateway_for  # noqa: F401 - fixture
from ..runtime.conftest import model, runtime  # noqa: F401 - fixtures
