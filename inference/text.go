package inference

import (
	"fmt"
	"io"
)

// WriteText writes the AIPW ATE of scope ("local" or "global") with its
// interval, the headline, then the plug-in ATE.
func (a ATEs) WriteText(w io.Writer, scope string) error {
	_, err := fmt.Fprintf(w, "%s ATE %.4f, 95%% interval [%.4f, %.4f] (AIPW, se %.4f, %d rows, %d propensities clipped to [%g, %g])\n"+
		"%s ATE %.4f (plug-in: mean of the CATEs before calibration; no standard error)\n",
		scope, a.AIPW.Estimate, a.AIPW.Lower, a.AIPW.Upper, a.AIPW.SE, a.AIPW.N, a.Clipped, DefaultClip, 1-DefaultClip,
		scope, a.PlugIn.Estimate)
	return err
}
