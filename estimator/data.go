package estimator

import (
	"errors"
	"fmt"
	"math"

	"github.com/crffd/crffd/records"
)

// Data holds the rows of one site that a model is trained or scored on
// (records.Data). The alias keeps the estimator's signatures readable and
// its callers unchanged; packages that only read rows import records.
type Data = records.Data

// Schema describes the columns shared by every site of a federation
// (records.Schema).
type Schema = records.Schema

// Moments are the sufficient statistics a site shares for standardisation
// (records.Moments).
type Moments = records.Moments

// validateData checks that d fits schema s: shapes agree, treatments are
// 0/1, a binary outcome is 0/1 and every value is finite.
func validateData(d *Data, s Schema) error {
	if d == nil || d.X == nil {
		return errors.New("estimator: nil data")
	}
	n, dx := d.X.Dims()
	if len(d.W) != n || len(d.Y) != n {
		return fmt.Errorf("estimator: %d covariate rows but %d treatments and %d outcomes", n, len(d.W), len(d.Y))
	}
	if dx != len(s.Binary) {
		return fmt.Errorf("estimator: %d covariates but the schema has %d", dx, len(s.Binary))
	}
	for i := range n {
		if w := d.W[i]; w != 0 && w != 1 {
			return fmt.Errorf("estimator: row %d: treatment %v is not 0 or 1", i, w)
		}
		y := d.Y[i]
		if math.IsNaN(y) || math.IsInf(y, 0) || (s.BinaryOutcome && y != 0 && y != 1) {
			return fmt.Errorf("estimator: row %d: invalid outcome %v", i, y)
		}
		for j, v := range d.X.RawRowView(i) {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("estimator: row %d: covariate %d is %v", i, j, v)
			}
		}
	}
	return nil
}
