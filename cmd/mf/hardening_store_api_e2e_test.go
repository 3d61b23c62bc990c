package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mfhq/mf/storage/eventlog/natstest"
	"github.com/mfhq/mf/storage/storagetest"
)

// TestStoreDownAPIAnswers503 runs mf api on an external NATS server and
// a real MinIO reached through a proxy, then takes the store down (its
// port refuses connections): a report that must read the store is
// answered 503 store_unavailable with a Retry-After, not 500; an answer
// that needs no store (the project list, from the catalog on the log) is
// still 200; once the store is back the same report answers 200.
func TestStoreDownAPIAnswers503(t *testing.T) {
	ns := natstest.StartServer(t, "nats", "")
	store := storagetest.FaultyStoreProxy(t, storagetest.StartMinIO(t))
	shared := []string{"--log", ns.URL(), "--store", store.URL}
	if code, out, errOut := runMF(t, nil, append(append([]string{"provision"}, shared...), demoFile)...); code != 0 {
		t.Fatalf("mf provision: exit %d\n%s%s", code, out, errOut)
	}
	rep := startRole(t, "api", shared...)
	auth := []string{"Authorization", "Bearer " + demoPAT}
	projects := rep.api + "/api/v1/projects"
	// No report is read before the outage: nothing of the project is
	// cached, so each report below must reach the store.
	store.Down()
	for _, path := range []string{"/overview?period=24h", "/people"} {
		code, hdr, body, err := tryDoWithin(2*time.Minute, "GET", projects+"/"+demoProject+path, nil, auth...)
		if err != nil {
			t.Fatalf("%s while the store is down: %v", path, err)
		}
		var doc struct {
			Errors []struct{ Status, Code, Detail string }
		}
		if code != 503 || json.Unmarshal(body, &doc) != nil || len(doc.Errors) != 1 ||
			doc.Errors[0].Status != "503" || doc.Errors[0].Code != "store_unavailable" || doc.Errors[0].Detail == "" {
			t.Errorf("%s while the store is down: %d %s, want 503 with one error store_unavailable", path, code, body)
		}
		if ra := hdr.Get("Retry-After"); ra != "5" {
			t.Errorf("%s while the store is down: Retry-After %q, want 5", path, ra)
		}
	}
	if code, _, body := do(t, "GET", projects, nil, auth...); code != 200 {
		t.Errorf("the project list (no store needed) while the store is down: %d %s", code, body)
	}
	store.Up()
	waitForEvery(t, time.Minute, 500*time.Millisecond, func() bool {
		code, _, _ := do(t, "GET", projects+"/"+demoProject+"/overview?period=24h", nil, auth...)
		return code == 200
	})
	if c := rep.stop(time.Minute); c != 0 {
		t.Errorf("mf api: exit %d on SIGTERM; output:\n%s", c, tail(rep.out.String(), 4000))
	}
}
