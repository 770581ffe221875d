package coordinatord

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/store/coordstore"
)

// TestResumedSites: a coordinator restarted during a run that went on
// without some sites resumes it with the sites it covers, while min_sites
// allows them; otherwise it starts with every listed site (and a
// checkpoint of other sites is then refused by RunCoordinator).
func TestResumedSites(t *testing.T) {
	ctx := context.Background()
	db, err := coordstore.Open(ctx, filepath.Join(t.TempDir(), "coordinator.sqlite"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	all := []string{"a", "b", "c"}
	if got, err := ResumedSites(ctx, db, all, 2); err != nil || !slices.Equal(got, all) {
		t.Errorf("without a checkpoint: %v, %v", got, err)
	}
	for _, tc := range []struct {
		saved    []string
		minSites int
		want     []string
	}{
		{[]string{"a", "c"}, 2, []string{"a", "c"}},
		{[]string{"a", "c"}, 3, all},
		{[]string{"c", "a"}, 2, all},
		{[]string{"a", "d"}, 1, all},
	} {
		if err := db.Save(ctx, &federation.State{RunID: "run-1", Sites: tc.saved, Step: 3}); err != nil {
			t.Fatal(err)
		}
		if got, err := ResumedSites(ctx, db, all, tc.minSites); err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("checkpoint of %v, min_sites %d: %v, %v; want %v", tc.saved, tc.minSites, got, err, tc.want)
		}
	}
}
