package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/crffd/crffd/store"
)

func TestRunLog(t *testing.T) {
	ctx := context.Background()
	s := openSite(t, newRecordsFile(t))
	for _, e := range []store.RunEnd{
		{Run: "r1", Status: store.RunRefused, Reason: "too few rows"},
		{Run: "r2", Status: store.RunCompleted},
		{Run: "r1", Status: store.RunCompleted},
	} {
		if err := s.LogRun(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.RunLog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[{r2 completed } {r1 completed }]" {
		t.Errorf("run log %v", got)
	}
	for _, bad := range []store.RunEnd{{Run: "r3", Status: "lost"}, {Status: store.RunFailed}} {
		if err := s.LogRun(ctx, bad); !errors.Is(err, store.ErrBadResult) {
			t.Errorf("%+v: %v, want store.ErrBadResult", bad, err)
		}
	}
}
