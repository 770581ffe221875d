package report

import (
	"fmt"
	"html/template"
)

// funcs are the helpers of the page templates.
var funcs = template.FuncMap{
	"bytes": humanBytes,
	"pct": func(n, of int) string {
		if of == 0 {
			return "0%"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
	},
	"share": func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
}

// humanBytes writes n bytes with a binary unit.
func humanBytes(n int) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), -1
	for f >= unit && u < 3 {
		f /= unit
		u++
	}
	return fmt.Sprintf("%.1f %ciB (%d B)", f, "KMGT"[u], n)
}

// style is the inline stylesheet shared by the pages.
const style = `{{define "style"}}<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1a1a1a; background: #fff; margin: 0 auto; max-width: 1080px; padding: 1.5em 2em 3em; line-height: 1.45; }
h1 { font-size: 1.7em; margin: 0 0 .2em; }
h2 { font-size: 1.25em; margin: 1.8em 0 .5em; padding-bottom: .2em; border-bottom: 2px solid #888; }
.meta { color: #555; font-size: .9em; }
table { border-collapse: collapse; margin: .6em 0; font-size: .92em; }
th, td { border: 1px solid #ccc; padding: .3em .7em; text-align: right; }
th { background: #eef3f8; }
td.l, th.l { text-align: left; }
img { display: block; max-width: 100%; border: 1px solid #ddd; margin: .5em 0; }
.note { background: #f4f4f4; border-left: 4px solid #888; padding: .6em 1em; }
.warn { background: #fff1ee; border-left: 4px solid #cc0000; padding: .6em 1em; }
.ok { background: #eefaf4; border-left: 4px solid #009e73; padding: .6em 1em; }
tr.extreme td { background: #fff1ee; }
footer { margin-top: 3em; color: #777; font-size: .85em; }
</style>{{end}}`

// siteHTML is the site report.
const siteHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
{{template "style"}}
</head>
<body>
<h1>{{.Title}}</h1>
<p class="meta">Site file <code>{{.File}}</code>{{with .Run}} · run <code>{{.ID}}</code> on table <code>{{.Table}}</code>, published {{.Published}}{{end}} · report generated {{.Generated}}</p>

<h2>Covariate balance before estimating</h2>
{{range .Balance}}<h3>{{.Scope}}</h3>
<p class="{{.Class}}"><strong>Overlap: {{.Verdict}}.</strong>{{range .Reasons}} {{.}}.{{end}} What to do: {{.Advice}}.</p>
<p>{{.Treated}} treated and {{.Control}} control rows{{if gt .Sites 1}} at {{.Sites}} sites{{end}}; after weighting they count as {{.ESSTreated}} and {{.ESSControl}} rows (effective sample size).{{if .LeftOut}} {{.LeftOut}} rows were left out for faults such as missing values.{{end}}</p>
{{with .Figure}}<img {{.Src}} alt="{{.Alt}}">{{end}}
<table>
<tr><th>rank</th><th class="l">covariate</th><th class="l">type</th><th>missing</th><th>SMD</th><th>weighted SMD</th></tr>
{{range .Rows}}<tr{{if .Imbalanced}} class="extreme"{{end}}><td>{{.Rank}}</td><td class="l">{{.Name}}</td><td class="l">{{.Type}}</td><td>{{.Missing}}</td><td>{{.SMD}}</td><td>{{.WSMD}}</td></tr>
{{end}}</table>
{{else}}<p class="note">No balance diagnostics in this file: run crffd check (crffd fit and federated runs write them too).</p>{{end}}
<p>From <code>crff_balance</code>: the standardised mean difference (SMD) of each covariate, treated − control over the pooled standard deviation, before and after weighting each row by its inverse propensity (1/e for treated rows, 1/(1−e) for controls) under a logistic propensity model; |SMD| &gt; 0.1, shaded, is the usual mark of imbalance. A covariate that stays imbalanced after weighting is one the estimate leans on its outcome model to adjust for.</p>

<h2>Average treatment effects</h2>
{{if .ATEs}}<table>
<tr><th class="l">scope</th><th class="l">estimator</th><th>ATE</th><th>standard error</th><th>95% interval</th><th>rows</th><th>propensities clipped</th><th>of the se, privacy noise</th></tr>
{{range .ATEs}}<tr><td class="l">{{.Scope}}</td><td class="l">{{.Estimator}}</td><td>{{.ATE}}</td><td>{{.SE}}</td><td>{{.Interval}}</td><td>{{.N}}</td><td>{{.Clipped}}</td><td>{{.NoiseSE}}</td></tr>
{{end}}</table>
<p>aipw: the doubly robust estimate, with propensity and outcome models cross-fitted on other folds of each site's rows; its standard error comes from the influence function, and the interval is ATE ± 1.96·se. plugin: the mean of the CausalRFF CATEs (the paper's estimate); it has no standard error, and on confounded data it can be biased. A global estimate over differentially private sites is built from the sums they released with noise: its standard error includes that noise, whose part the last column gives (se² = sampling variance + noise²), but not the bias of their clipping of the scores. A local estimate is this site's own, exact.</p>
{{else}}<p class="note">No ATE recorded.</p>{{end}}

<h2>Subgroup effects</h2>
{{if .GATEs}}{{with .Forest}}<img {{.Src}} alt="{{.Alt}}">{{end}}
<table>
<tr><th class="l">scope</th><th class="l">subgroup</th><th>rows</th><th>effect ± se</th><th>95% interval</th><th>mean CATE</th><th class="l">why no figures</th></tr>
{{range .GATEs}}<tr><td class="l">{{.Scope}}</td><td class="l">{{.Subgroup}}</td><td>{{.N}}</td><td>{{.Estimate}}</td><td>{{.Interval}}</td><td>{{.PlugIn}}</td><td class="l">{{.Reason}}</td></tr>
{{end}}</table>
<p>From <code>crff_gate</code>, for the subgroups named in <code>crff_subgroup</code>: the AIPW group average treatment effect, the mean doubly robust score ψ of the group's scored rows, with its standard error from their spread; the mean CATE is the chosen estimator's before calibration. A refused predicate, one SQLite cannot run, and a group with fewer than federation.min_arm_rows rows in an arm have no figures, and say why.</p>
{{else}}<p class="note">No subgroups: name them in crff_subgroup (name, predicate), and crffd computes their effects after the next run or rescoring.</p>{{end}}

<h2>Training loss per round</h2>
{{with .Loss}}<img {{.Src}} alt="{{.Alt}}"><p>{{$.LossCaption}}</p>{{else}}<p class="note">{{.LossNote}}</p>{{end}}

<h2>Transfer factors λ: how much this site's models borrow from each peer (not site similarity)</h2>
<p>One row per model of this site, one column per peer: the cell of model m and peer j is λ<sub>ij</sub> of model m, with i this site. {{template "lambda"}} A site file holds its own row of each model's matrix; the coordinator's report shows the whole federation.</p>
{{with .Transfer}}<img {{.Src}} alt="{{.Alt}}">{{else}}<p class="note">{{.TransferNote}}</p>{{end}}

<h2>Conditional average treatment effects</h2>
{{with .CATE}}<img {{.Src}} alt="{{.Alt}}"><p>The reported CATEs of crff_cate (the CausalRFF CATEs, or the estimator model selection chose, with their doubly robust calibration). Solid lines mark the AIPW ATEs, dashed lines their 95% intervals.</p>{{else}}<p class="note">{{.CATENote}}</p>{{end}}

<h2>Model selection</h2>
{{if .Selection}}<table>
<tr><th class="l">candidate</th><th>doubly robust loss</th><th>difference from the reference</th><th class="l">role</th></tr>
{{range .Selection}}<tr><td class="l">{{.Candidate}}</td><td>{{.Loss}}</td><td>{{.Diff}}</td><td class="l">{{.Role}}</td></tr>
{{end}}</table>
<p>From <code>crff_model_selection</code>: each candidate's mean loss (ψ − τ̂(x))² on the {{.SelectionRows}} rows held out of training, with ψ the doubly robust pseudo-outcome, and its mean paired difference from the reference (the first row); lower is better. The chosen estimate, the ensemble, is the mean CATE of the members: the candidates whose loss exceeds the least loss by at most model.selection_z standard errors of the paired difference, those the held-out rows cannot tell from the best. It is shifted towards this site's doubly robust ATE by the gap between the two, shrunk by its standard error; in a federation the sites' gaps are pooled as a random-effects meta-analysis, so that alike sites share one gap and unlike sites keep nearer their own. Its loss, measured on the rows that chose its members, flatters it, and has no standard error.</p>
{{else}}<p class="note">No model selection in this run: crff_cate holds the CausalRFF (latent) CATE of the configured kernel (model.estimator: latent).</p>{{end}}

<h2>Propensity overlap</h2>
{{with .Overlap}}<img {{.Src}} alt="{{.Alt}}">{{else}}<p class="note">{{.OverlapNote}}</p>{{end}}
{{if .Scored}}{{if .Problems}}<p class="warn"><strong>Positivity warning:</strong> {{range $i, $p := .Problems}}{{if $i}}; {{end}}{{$p}}{{end}}.{{if .Outside}} Outside {{.Bounds}}: {{.OutsideTreated}} treated and {{.OutsideControl}} control rows.{{end}} Where an arm is thin or a propensity extreme, the effects rest on extrapolation from the other arm; see the views <code>crff_positivity</code> and <code>crff_overlap</code>.</p>
{{else if .Outside}}<p class="note">{{.Outside}} of {{.Arms.Rows}} scored rows ({{pct .Outside .Arms.Rows}}) have a propensity outside {{.Bounds}} ({{.OutsideTreated}} treated, {{.OutsideControl}} control): within the limit, and each arm holds enough rows ({{.Arms.Treated}} treated, {{.Arms.Control}} control). The effects of those rows rest on extrapolation; see the view <code>crff_overlap</code>.</p>
{{else if .Arms.Rows}}<p class="ok">Every scored row has a propensity within {{.Bounds}}, and each arm holds enough rows ({{.Arms.Treated}} treated, {{.Arms.Control}} control).</p>
{{end}}<p class="meta">{{.Rules}}</p>
{{end}}{{if .Buckets}}<table>
<tr><th class="l">propensity bucket</th><th>treated</th><th>control</th><th>share of rows</th><th class="l">flag</th></tr>
{{range .Buckets}}<tr{{if .Extreme}} class="extreme"{{end}}><td class="l">[{{.Lower}}, {{.Upper}}{{if eq .Upper 1.0}}]{{else}}){{end}}</td><td>{{.Treated}}</td><td>{{.Control}}</td><td>{{share .Share}}</td><td class="l">{{if .Extreme}}extreme{{end}}</td></tr>
{{end}}</table>{{end}}

<h2>Is the heterogeneity real</h2>
{{with .Hetero}}<table>
<tr><th class="l">statistic</th><th>estimate ± se</th><th>95% interval</th><th class="l"></th></tr>
{{range .Stats}}<tr><td class="l">{{.Name}}</td><td>{{.Estimate}}</td><td>{{.Interval}}</td><td class="l">{{.Extra}}</td></tr>
{{end}}</table>
<p>From <code>crff_heterogeneity</code>, on the rows model selection held out of the CATE's training. blp_het is the loading of the doubly robust scores on the CATE (1: calibrated; 0: no heterogeneity captured), its p-value one-sided; autoc and qini are the rank-weighted ATEs of the ranking by the CATE.</p>
{{with .GATES}}<img {{.Src}} alt="{{.Alt}}">{{end}}
{{with .TOC}}<img {{.Src}} alt="{{.Alt}}">{{end}}
{{if .CLAN}}<table>
<tr><th class="l">covariate</th><th>top fifth − bottom fifth</th><th>95% interval</th></tr>
{{range .CLAN}}<tr><td class="l">{{.Name}}</td><td>{{.Estimate}}</td><td>{{.Interval}}</td></tr>
{{end}}</table>{{end}}
{{if .Policy}}<table>
<tr><th class="l">rule</th><th>value ± se</th><th>95% interval</th><th class="l"></th></tr>
{{range .Policy}}<tr><td class="l">{{.Name}}</td><td>{{.Estimate}}</td><td>{{.Interval}}</td><td class="l">{{.Extra}}</td></tr>
{{end}}</table>{{end}}
{{else}}<p class="note">No heterogeneity tests: they are computed after a run with model selection (model.estimator: auto), on its held-out rows.</p>{{end}}

<h2>Audit: what this site sent and received</h2>
{{if .Audit}}<p>From <code>crff_audit</code>: every message envelope, described by names and shapes, never values.</p>
<table>
<tr><th class="l">direction</th><th class="l">kind</th><th>peers</th><th>messages</th><th>payload bytes</th></tr>
{{range .Audit}}<tr><td class="l">{{.Direction}}</td><td class="l">{{.Kind}}</td><td>{{.Peers}}</td><td>{{.Messages}}</td><td>{{bytes .Bytes}}</td></tr>
{{end}}{{range .AuditTotals}}<tr><th class="l">{{.Direction}}</th><th class="l">all</th><th>{{.Peers}}</th><th>{{.Messages}}</th><th>{{bytes .Bytes}}</th></tr>
{{end}}</table>{{else}}<p class="note">The audit log is empty: this site has not exchanged any message (a run of crffd fit stays on the site).</p>{{end}}

<h2>Differential privacy</h2>
{{with .Privacy}}<p>From <code>crff_privacy</code>, the charges of run <code>{{.Run}}</code> to this site's budget, each spent before the site computed anything for it. Every charge so far, composed, spends ε = {{.Total}} at δ = {{.Delta}} of a budget of {{.Budget}}; {{.Left}} is left. The guarantee is stated under the relation: {{.Relation}}.</p>
<table>
<tr><th class="l">step</th><th>ε of the step alone</th><th>Gaussian mechanisms</th><th>sampling rate</th><th>noise multiplier</th></tr>
{{range .Steps}}<tr><td class="l">{{.Step}}</td><td>{{.Epsilon}}</td><td>{{.Mechanisms}}</td><td>{{.Rate}}</td><td>{{.Noise}}</td></tr>
{{end}}</table>
<p><strong>Released exactly, outside the guarantee (privacy.exact):</strong> {{.Exact}}. <strong>Released with noise:</strong> the training rounds{{range .Noised}}, {{.}}{{end}}. A private site sends no balance sums unless privacy.exact names balance.</p>
{{else}}<p class="note">No privacy charge recorded: this site has not taken part in a run with privacy.epsilon set, and what it sent carried no differential-privacy noise.</p>{{end}}

<footer>Generated by crffd report. This page shows distributions of the site's own rows: it is for the site's operator and is not sent anywhere.</footer>
</body>
</html>
`

// lambda says what a transfer factor is, in the same words in both
// reports. A reader who sees a matrix of sites by sites takes it for a
// similarity matrix unless told otherwise, and in the outcome and latent
// models it is not one (package estimator's documentation).
const lambda = `{{define "lambda"}}λ<sub>ij</sub> is how much site i's model borrows from site j's parameters in training: site i's effective weights are its own plus λ<sub>ij</sub> times site j's, so 1 pools site j's parameters as if they were site i's own and 0 ignores them. It is learned separately for each model (propensity, outcome, latent) to fit the training rows. It is not a measure of how alike two sites are: on the paper's synthetic design of five sites, the outcome and latent models' λ settled near 0.4 between identical sites as between dissimilar ones (with the default model.transfer_prior of 0; docs/benchmarks.md, "Reproducing the paper's tables"), and a site is protected from dissimilar peers by its own weights, which always count in full. In those runs only the propensity model's λ tracked site differences. Each cell prints its factor; colours run from red (0) through orange and yellow to white (1).{{end}}`

// parsePage parses the page template body with the shared definitions.
func parsePage(name, body string) *template.Template {
	t := template.New(name).Funcs(funcs)
	for _, def := range []string{style, lambda, body} {
		t = template.Must(t.Parse(def))
	}
	return t
}

var siteTemplate = parsePage("site", siteHTML)

// coordinatorHTML is the federation report.
const coordinatorHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
{{template "style"}}
</head>
<body>
<h1>{{.Title}}</h1>
<p class="meta">Coordinator state file <code>{{.File}}</code> · report generated {{.Generated}}</p>

<h2>Finished runs</h2>
{{if .Runs}}<table>
<tr><th class="l">run</th><th class="l">finished</th><th>global ATE (AIPW)</th><th>standard error</th><th>95% interval</th><th>plug-in ATE</th><th>rows</th><th class="l">sites</th></tr>
{{range .Runs}}<tr><td class="l"><code>{{.Run}}</code></td><td class="l">{{.Finished}}</td><td>{{.ATE}}</td><td>{{.SE}}</td><td>{{.Interval}}</td><td>{{.PlugIn}}</td><td>{{.Rows}}</td><td class="l">{{.Sites}}</td></tr>
{{end}}</table>
<p>sites: the sites whose rows the global ATEs and the transfer factors cover. With coordinator.min_sites, a run that a site refused or fell silent in is run again at once without it, while enough sites remain; "all" marks runs recorded before the column existed.</p>{{else}}<p class="note">No run has finished yet.</p>{{end}}

<h2>Transfer factors λ of the latest finished run: how much each site's model borrows from each other site (not site similarity)</h2>
{{with .Finished}}<p>Run <code>{{.Run}}</code>, one matrix per model. Row i, column j: λ<sub>ij</sub>; ones on the diagonal. {{template "lambda"}}</p>
{{range .Models}}<h3>{{.Name}} model</h3>
{{with .Lambda}}<img {{.Src}} alt="{{.Alt}}">{{end}}
{{end}}{{else}}<p class="note">No finished run recorded its transfer factors (runs finished by a crffd older than this report's do not).</p>{{end}}

<h2>Run in progress</h2>
{{with .State}}<p>Run <code>{{.Run}}</code>, step {{.Step}}, checkpoint saved {{.Saved}}{{with .Training}}; training {{.}}{{end}}.</p>
<table>
<tr><th class="l">site</th><th>rows</th><th>rows dropped as duplicates</th></tr>
{{range .Sites}}<tr><td class="l">{{.Name}}</td><td>{{.Rows}}</td><td>{{.Dropped}}</td></tr>
{{end}}</table>
{{if .Models}}<h2>Transfer factors λ and loss of the models trained so far: how much each site's model borrows from each other site (not site similarity)</h2>
<p>Row i, column j: λ<sub>ij</sub>; ones on the diagonal. {{template "lambda"}}</p>
{{range .Models}}<h3>{{.Name}}: {{.Rounds}} rounds, final loss {{.Loss}}</h3>
{{with .Lambda}}<img {{.Src}} alt="{{.Alt}}">{{end}}
{{end}}{{else}}<p class="note">No model has finished training in this run yet.</p>{{end}}
{{else}}<p class="note">No run is in progress.</p>{{end}}

<footer>Generated by crffd report from the coordinator's own state: no site's rows reach the coordinator.</footer>
</body>
</html>
`

var coordinatorTemplate = parsePage("coordinator", coordinatorHTML)
