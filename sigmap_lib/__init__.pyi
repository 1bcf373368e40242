"""The public API of :mod:`sigmap_lib` (loaded lazily; see ``__init__.py``)."""

from . import errors as errors
from . import inputs as inputs
from . import irt as irt
from . import metabench as metabench
from . import nll as nll
from . import overlap as overlap
from . import perf as perf
from . import reporting as reporting
from . import signatures as signatures
from . import studies as studies
from . import worlds as worlds
from .errors import (
    SigmapInputError as SigmapInputError,
)
from .inputs import (
    CorpusStore as CorpusStore,
)
from .inputs import (
    build_corpus_store as build_corpus_store,
)
from .inputs import (
    read_catalog as read_catalog,
)
from .inputs import (
    read_corpus as read_corpus,
)
from .inputs import (
    read_registry as read_registry,
)
from .inputs import (
    read_responses as read_responses,
)
from .inputs import (
    read_scores as read_scores,
)
from .inputs import (
    segment_units as segment_units,
)
from .inputs import (
    to_wide as to_wide,
)
from .irt import (
    estimate_theta as estimate_theta,
)
from .irt import (
    fit_irt as fit_irt,
)
from .metabench import (
    MetabenchConfig as MetabenchConfig,
)
from .metabench import (
    MetabenchFit as MetabenchFit,
)
from .metabench import (
    fit_metabench as fit_metabench,
)
from .metabench import (
    score_new_models as score_new_models,
)
from .nll import (
    NLLStore as NLLStore,
)
from .nll import (
    RankStore as RankStore,
)
from .nll import (
    document_unit_nll as document_unit_nll,
)
from .nll import (
    load_model as load_model,
)
from .nll import (
    score_corpus as score_corpus,
)
from .overlap import (
    OverlapMatrix as OverlapMatrix,
)
from .overlap import (
    UnitBits as UnitBits,
)
from .overlap import (
    performance_overlap as performance_overlap,
)
from .overlap import (
    semantic_overlap as semantic_overlap,
)
from .overlap import (
    signature_overlap as signature_overlap,
)
from .signatures import (
    Signature as Signature,
)
from .signatures import (
    SignatureMethod as SignatureMethod,
)
from .signatures import (
    extract_signatures as extract_signatures,
)
from .signatures import (
    forward_select as forward_select,
)
from .signatures import (
    preselect_correlation as preselect_correlation,
)
from .signatures import (
    screen as screen,
)
from .signatures import (
    thrush_correlation as thrush_correlation,
)

__version__: str
