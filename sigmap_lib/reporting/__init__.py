"""Reports: plots, the HTML report renderer, the overlap report, metabench plots and
the findings against a world's known truth.
"""

from ._findings import (
    domain_shares,
    matching_domain_summary,
)
from ._honest import (
    honest_sections,
    model_table,
    signature_resolution,
    skip_reasons,
)
from ._html import (
    Section,
    markdown_table,
    render_html_report,
)
from ._metabench_plots import (
    plot_reconstruction,
    plot_scored_models,
    plot_test_information,
)
from ._metabench_report import MetabenchReport, metabench_report
from ._overlap_report import (
    build_overlap_report,
    level_analyses,
    not_testable_reason,
)
from ._plots import (
    correlation_histogram,
    dendrogram,
    heatmap,
    level_distributions,
    scatter_true_vs_pred,
)
from ._signatures import (
    detection_text,
    levels_text,
    null_threshold_plot,
    signature_rows,
    signature_sections,
)
from ._truth import truth_sections

__all__ = [
    "MetabenchReport",
    "Section",
    "build_overlap_report",
    "correlation_histogram",
    "dendrogram",
    "detection_text",
    "domain_shares",
    "heatmap",
    "honest_sections",
    "level_analyses",
    "level_distributions",
    "levels_text",
    "markdown_table",
    "matching_domain_summary",
    "metabench_report",
    "model_table",
    "not_testable_reason",
    "null_threshold_plot",
    "plot_reconstruction",
    "plot_scored_models",
    "plot_test_information",
    "render_html_report",
    "scatter_true_vs_pred",
    "signature_resolution",
    "signature_rows",
    "signature_sections",
    "skip_reasons",
    "truth_sections",
]
