package evaluate

import (
	"github.com/crffd/crffd/heterogeneity"
)

// Hetero are a run's heterogeneity tests (package heterogeneity) on the
// test rows, which the CATE was not trained on, against the truth.
type Hetero struct {
	// BLPHetP is the one-sided p-value of the BLP's loading on τ̂.
	BLPHetP float64 `json:"blp_het_p"`
	// GATESCoverage is the share of the fifths of τ̂ whose interval holds
	// the fifth's mean true effect.
	GATESCoverage float64 `json:"gates_coverage"`
	// GATESCovered says, fifth by fifth from the lowest τ̂, whether its
	// interval holds its mean true effect.
	GATESCovered []bool `json:"gates_covered"`
	// AUTOC is the estimate, AUTOCTrue its estimand (the ranking by τ̂
	// scored by the true effects), AUTOCBest the true ranking's, and
	// AUTOCCovered whether the interval holds AUTOCTrue.
	AUTOC        float64 `json:"autoc"`
	AUTOCTrue    float64 `json:"autoc_true"`
	AUTOCBest    float64 `json:"autoc_best"`
	AUTOCCovered bool    `json:"autoc_covered"`
	// PolicyValue is the AIPW value of treating where the calibrated
	// CATE's interval is above 0, PolicyTrue the mean of μ_π(x) over the
	// rows, and PolicyCovered whether the interval holds it.
	PolicyValue   float64 `json:"policy_value"`
	PolicyTrue    float64 `json:"policy_true"`
	PolicyCovered bool    `json:"policy_covered"`
}

// hetero returns the Hetero of rows with scores psi and gamma0, the
// uncalibrated CATE cate, the calibrated interval's lower bounds lower,
// and the true effects tau and control means mu0.
func hetero(psi, gamma0, cate, lower, tau, mu0 []float64) (*Hetero, error) {
	s, err := heterogeneity.NewBLPSums(psi, cate, 0)
	if err != nil {
		return nil, err
	}
	blp, err := s.BLP()
	if err != nil {
		return nil, err
	}
	h := &Hetero{BLPHetP: blp.HetP}
	g, err := heterogeneity.NewGATES(psi, cate, heterogeneity.Fifths)
	if err != nil {
		return nil, err
	}
	for k, rows := range g.Rows {
		var m float64
		for _, i := range rows {
			m += tau[i] / float64(len(rows))
		}
		covered := g.Groups[k].Lower <= m && m <= g.Groups[k].Upper
		h.GATESCovered = append(h.GATESCovered, covered)
		h.GATESCoverage += b2f(covered) / float64(len(g.Rows))
	}
	est, err := heterogeneity.NewRATE(psi, cate)
	if err != nil {
		return nil, err
	}
	truth, err := heterogeneity.NewRATE(tau, cate)
	if err != nil {
		return nil, err
	}
	best, err := heterogeneity.NewRATE(tau, tau)
	if err != nil {
		return nil, err
	}
	h.AUTOC, h.AUTOCTrue, h.AUTOCBest = est.AUTOC.Estimate, truth.AUTOC.Estimate, best.AUTOC.Estimate
	h.AUTOCCovered = est.AUTOC.Lower <= h.AUTOCTrue && h.AUTOCTrue <= est.AUTOC.Upper
	treat := make([]bool, len(psi))
	for i := range treat {
		treat[i] = lower[i] > 0
		h.PolicyTrue += mu0[i] / float64(len(psi))
		if treat[i] {
			h.PolicyTrue += tau[i] / float64(len(psi))
		}
	}
	p, err := heterogeneity.NewPolicy(gamma0, psi, treat)
	if err != nil {
		return nil, err
	}
	h.PolicyValue = p.Value.Estimate
	h.PolicyCovered = p.Value.Lower <= h.PolicyTrue && h.PolicyTrue <= p.Value.Upper
	return h, nil
}
