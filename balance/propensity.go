package balance

import (
	"context"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/glm"
)

// Ridge is the penalty λ of [Propensity] on the coefficients of the
// standardised covariates (not the intercept): λ/2·‖β‖². It changes
// nothing measurable on a few hundred rows, and keeps the coefficients
// finite when a covariate separates the arms.
const Ridge = 1.0

// ErrNotConverged means that the logistic regression did not converge.
var ErrNotConverged = glm.ErrNotConverged

// Propensity fits a logistic regression of w (0 or 1) on the columns of x,
// each standardised, with an intercept and the ridge penalty [Ridge]
// (glm.FitLogistic), and returns the fitted propensities.
func Propensity(ctx context.Context, x mat.Matrix, w []float64) ([]float64, error) {
	if n, _ := x.Dims(); len(w) != n {
		return nil, fmt.Errorf("%w: %d rows of covariates, %d treatments", ErrShape, n, len(w))
	}
	for i, v := range w {
		if v != 0 && v != 1 {
			return nil, fmt.Errorf("balance: row %d: treatment %v is not 0 or 1", i, v)
		}
	}
	m, err := glm.FitLogistic(ctx, x, w, Ridge)
	if err != nil {
		return nil, fmt.Errorf("balance: propensity: %w", err)
	}
	return m.Predict(nil, x)
}
