package demo

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/sandbox"
)

// truthQuery pairs each truth row with its CATE, found by crff_cate_rows'
// key (run, row_id): the unary + takes t.id's affinity off the comparison,
// which would otherwise bar the key, and the planner then scanned the
// truth for every CATE (at a million rows a site, hours, not seconds).
const truthQuery = `SELECT t.mu1 - t.mu0, c.cate FROM ` + sandbox.TruthTable + ` AS t CROSS JOIN crff_cate AS c ON c.row_id = +t.id`

// readTruth pairs the reported CATEs of the site file db (crff_cate) with
// the simulated truth beside them (sandbox.TruthTable) by row id, and
// returns the rows paired, their true ATE (the mean of mu1 − mu0) and the
// CATEs' sqrt(PEHE).
func readTruth(ctx context.Context, db *sql.DB) (n int, trueATE, sqrtPEHE float64, err error) {
	rows, err := db.QueryContext(ctx, truthQuery)
	if err != nil {
		return 0, 0, 0, err
	}
	defer rows.Close()
	var tau, cate []float64
	for rows.Next() {
		var t, c float64
		if err := rows.Scan(&t, &c); err != nil {
			return 0, 0, 0, err
		}
		tau, cate = append(tau, t), append(cate, c)
	}
	if err := rows.Err(); err != nil {
		return 0, 0, 0, err
	}
	trueATE, sqrtPEHE, err = truth(cate, tau)
	return len(tau), trueATE, sqrtPEHE, err
}

// truth returns the true ATE of rows with true effects tau, the mean of
// tau, and the sqrt(PEHE) of the estimated effects cate against them. It
// fails without rows.
func truth(cate, tau []float64) (trueATE, sqrtPEHE float64, err error) {
	if sqrtPEHE, err = estimator.SqrtPEHE(cate, tau); err != nil {
		return 0, 0, fmt.Errorf("no CATEs paired with the truth: %w", err)
	}
	for _, t := range tau {
		trueATE += t
	}
	return trueATE / float64(len(tau)), sqrtPEHE, nil
}
