"""Reports: plots, the HTML report renderer, the overlap report, metabench plots and
the findings against a world's known truth.
"""

from ._findings import (
    domain_shares,
    matching_domain_summary,
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
from ._overlap_report import (
    build_overlap_report,
    level_analyses,
)
from ._plots import (
    correlation_histogram,
    dendrogram,
    heatmap,
    level_distributions,
    scatter_true_vs_pred,
)
from ._signatures import null_threshold_plot, signature_sections
from ._truth import truth_sections

__all__ = [
    "Section",
    "build_overlap_report",
    "correlation_histogram",
    "dendrogram",
    "domain_shares",
    "heatmap",
    "level_analyses",
    "level_distributions",
    "markdown_table",
    "matching_domain_summary",
    "null_threshold_plot",
    "plot_reconstruction",
    "plot_scored_models",
    "plot_test_information",
    "render_html_report",
    "scatter_true_vs_pred",
    "signature_sections",
    "truth_sections",
]
