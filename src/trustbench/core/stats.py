"""Statistics shared by every track: exact, clustered and paired intervals, agreement, bounds.

Everything here is suite-independent and documented where it is computed. The rules it serves
(spec "Report Uncertainty Without Multiplying the Case Count", "Keep Unknown Effects Visible"):

- binomial intervals (`binomial_interval`; `rate_figure` in `trustbench.core.figures`, the home of
  `Figure` and `Interval`) for independent units, Clopper-Pearson exact first, Wilson beside it;
- clustered intervals (`cluster_robust_interval`, `cluster_bootstrap_interval`,
  `sign_flip_interval`, `clustered_figure`) when cases share a domain group or a trace;
- K trials per case reduced to one value per case first (`reduce_trials`, `pass_hat_k`);
- paired comparisons of two configurations on the same cases (`mcnemar_exact`,
  `paired_difference`, `paired_cluster_bootstrap_ci`, `sign_flip_pvalue`), and the `difference`
  figure of any paired design's per-cluster sums (`difference_figure`);
- agreement (`cohens_kappa`, `fleiss_kappa`, `stuart_maxwell`) that says "not computable"
  instead of NaN;
- unresolved outcomes as a lower and an upper figure (`bounded_rate`).

Every resampled result records its method, seed and resample count in its `Interval`.
"""

from trustbench.core._binomial import binomial_interval, zero_failure_upper_bound
from trustbench.core._intervals import (
    BoundedRate,
    HomogeneityResult,
    KappaResult,
    Reduction,
    agreement_table,
    all_pass_in_k,
    any_violation_in_k,
    bounded_rate,
    cluster_sums,
    cohens_kappa,
    fleiss_kappa,
    pass_hat_k,
    pass_hat_k_by_case,
    reduce_trials,
    stuart_maxwell,
)
from trustbench.core._resampling import (
    DEFAULT_CHUNK_ELEMENTS,
    MAX_EXACT_CLUSTERS,
    McNemarResult,
    SignFlipResult,
    bootstrap_ratio_distribution,
    cluster_bootstrap_interval,
    cluster_robust_interval,
    clustered_figure,
    difference_figure,
    mcnemar_exact,
    paired_cluster_bootstrap_ci,
    paired_difference,
    sign_flip_interval,
    sign_flip_pvalue,
    sign_flip_test,
)

__all__ = [
    "DEFAULT_CHUNK_ELEMENTS",
    "MAX_EXACT_CLUSTERS",
    "BoundedRate",
    "HomogeneityResult",
    "KappaResult",
    "McNemarResult",
    "Reduction",
    "SignFlipResult",
    "agreement_table",
    "all_pass_in_k",
    "any_violation_in_k",
    "binomial_interval",
    "bootstrap_ratio_distribution",
    "bounded_rate",
    "cluster_bootstrap_interval",
    "cluster_robust_interval",
    "cluster_sums",
    "clustered_figure",
    "cohens_kappa",
    "difference_figure",
    "fleiss_kappa",
    "mcnemar_exact",
    "paired_cluster_bootstrap_ci",
    "paired_difference",
    "pass_hat_k",
    "pass_hat_k_by_case",
    "reduce_trials",
    "sign_flip_interval",
    "sign_flip_pvalue",
    "sign_flip_test",
    "stuart_maxwell",
    "zero_failure_upper_bound",
]
