// Package report renders crffd's results as one self-contained HTML page:
// the figures are PNG images drawn with gonum.org/v1/plot and embedded as
// data URIs, the styles are inline, and the page loads nothing from
// anywhere, so that it opens offline and can be archived as one file.
//
// [Site] reports one site file: the covariate balance with its love plot,
// the training loss per round with a caption for the run's optimiser, the
// site's transfer factors, the distribution of its CATEs with the ATEs and
// their intervals, the propensity of treated and control rows in a panel
// each with a positivity warning, and the audit summary of what the site
// sent and received. [Coordinator] reports a coordinator's state file: the
// finished runs with their global ATEs, the federation's full matrices of
// transfer factors of the latest finished run and, while a run is in
// progress, those of the models trained so far. Both say what a transfer
// factor λ_ij is: how much site i's model borrows from site j's parameters,
// learned per model; not a measure of how alike the sites are.
//
// A site report shows distributions of the site's own rows. It is meant
// for the site's operator, like the site file itself: crffd writes it to a
// local file and never sends it anywhere.
package report
