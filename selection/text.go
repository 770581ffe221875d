package selection

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// WriteText writes which of cands (the first the reference) won, chosen
// on n held-out rows with threshold z (NaN when not known: a federated
// site's), by how much, and the ensemble's shifts, one per site (one for a
// site alone): the chosen candidate is the ensemble of this package.
func WriteText(w io.Writer, cands []Candidate, chosen, n int, z float64, shifts []float64) error {
	ref, won := cands[0], cands[chosen]
	var members []string
	for _, c := range cands {
		if c.Member {
			members = append(members, c.Name)
		}
	}
	within := "the candidates the held-out rows cannot tell from the best"
	if !math.IsNaN(z) {
		within = fmt.Sprintf("the candidates within %.3g standard errors of the best", z)
	}
	shifted := "shifted by %s towards the doubly robust ATE"
	if len(shifts) > 1 {
		shifted = "shifted towards each site's doubly robust ATE, by %s"
	}
	by := make([]string, len(shifts))
	for s, v := range shifts {
		by[s] = fmt.Sprintf("%+.4g", v)
	}
	_, err := fmt.Fprintf(w, "model selection: the mean of %d of %d candidates on %d held-out rows (%s): %s\n"+
		"  doubly robust loss %.4g against the reference %s's %.4g (difference %+.4g), measured on the rows that chose it, so optimistic; "+shifted+"\n",
		len(members), len(cands)-1, n, within, strings.Join(members, ", "), won.Loss, ref.Name, ref.Loss, won.Diff, strings.Join(by, ", "))
	return err
}
