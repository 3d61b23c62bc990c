package main

import (
	"encoding/json"
	"testing"
)

// TestProvision adds the soak's goals to the demo project and finds how
// to send to it, for the website key and the server key.
func TestProvision(t *testing.T) {
	const demo = "../../../docs/demo-provision.json"
	out, tg, err := Provision(demo, "mf_demoweb1_Website-Key_1")
	if err != nil {
		t.Fatal(err)
	}
	if tg.Project != "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c03" || !tg.Website || tg.Origin != "https://shop.example" || tg.Timezone.String() != "Europe/Berlin" {
		t.Errorf("target %+v", tg)
	}
	var doc struct {
		Organizations []struct {
			Projects []struct {
				ID      string
				Actions []struct {
					ID, Role string
					Match    struct{ Event string }
				}
			}
		}
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	acts := doc.Organizations[0].Projects[0].Actions
	found := 0
	for i, g := range soakGoals {
		for _, a := range acts {
			if a.ID == g.id && a.Match.Event == eventNames[i] && a.Role == g.role {
				found++
			}
		}
	}
	if found != len(soakGoals) || len(acts) != 3+len(soakGoals) {
		t.Errorf("the demo's 3 actions and the soak's %d goals, got %d actions, %d of the goals", len(soakGoals), len(acts), found)
	}

	if _, tg, err := Provision(demo, "mf_demosrv1_Server-Secret_1"); err != nil || tg.Website || tg.Origin != "" {
		t.Errorf("server key: %+v %v", tg, err)
	}
	if _, _, err := Provision(demo, "mf_nokey000_Nothing"); err == nil {
		t.Error("a key no source has was taken")
	}
}
