// Package report renders crffd's results as one self-contained HTML page:
// the figures are PNG images drawn with gonum.org/v1/plot and embedded as
// data URIs, the styles are inline, and the page loads nothing from
// anywhere, so that it opens offline and can be archived as one file.
//
// [Site] reports one site file: the training loss per round, the site's
// transfer factors, the distribution of its CATEs with the ATEs and their
// intervals, the propensity overlap of treated and control rows with a
// positivity warning, and the audit summary of what the site sent and
// received. [Coordinator] reports a coordinator's state file: the finished
// runs with their global ATEs and, while a run is in progress, the
// federation's full matrices of transfer factors.
//
// A site report shows distributions of the site's own rows. It is meant
// for the site's operator, like the site file itself: crffd writes it to a
// local file and never sends it anywhere.
package report
