"""TD-error statistics and token weights (DESIGN §2 item 7, REFERENCE §12).

``td_ema`` keeps the running statistics (:class:`~bufcore.stats.td_ema.TDStatsEMA`);
``td_weighting`` turns TD errors into token weights and computes TD errors; ``td_quantiles``
summarises the normalised TD errors as quantiles and reads clipped fractions back from them;
``inputs`` holds the checks they share. This layer imports only the core modules and does no I/O.
"""
