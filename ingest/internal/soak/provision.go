package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// soakGoals are the goals the soak adds to the project: one per event name
// it sends (role conversion; intent for pageviews), so that the reporting
// API's goal list counts every event by name ("conversions: every event
// that reached it in the period"). Their ids are fixed.
var soakGoals = [len(eventNames)]struct{ id, name, role string }{
	{"50a50a50-0000-4000-8000-000000000001", "Soak: every pageview", "intent"},
	{"50a50a50-0000-4000-8000-000000000002", "Soak: every sign-in", "conversion"},
	{"50a50a50-0000-4000-8000-000000000003", "Soak: every cart", "conversion"},
	{"50a50a50-0000-4000-8000-000000000004", "Soak: every order", "conversion"},
	{"50a50a50-0000-4000-8000-000000000005", "Soak: every newsletter sign-up", "conversion"},
}

// Target is what the soak needs to know of the provisioned project: where
// it sends, with what, and where it reads the counts back.
type Target struct {
	Project  string
	Timezone *time.Location
	Key      string
	// Website is true for a website source's key (sent in the path, with
	// Origin), false for a server source's secret key (bearer).
	Website bool
	// Origin is the Origin header a website batch carries: an allowed
	// origin of the source ("" when it allows every origin).
	Origin string
}

// Provision reads the provisioning file at path, finds the project of
// the source whose key is key, adds the soak's goals to it, and returns
// the new file's bytes and the target.
func Provision(path, key string) ([]byte, Target, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, Target{}, fmt.Errorf("cannot read the provisioning file: %w", err)
	}
	return provisionWith(raw, key)
}

func provisionWith(raw []byte, key string) ([]byte, Target, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, Target{}, fmt.Errorf("cannot parse the provisioning file: %w", err)
	}
	orgs, _ := doc["organizations"].([]any)
	for _, o := range orgs {
		org, _ := o.(map[string]any)
		projects, _ := org["projects"].([]any)
		for _, p := range projects {
			proj, _ := p.(map[string]any)
			sources, _ := proj["sources"].([]any)
			for _, s := range sources {
				src, _ := s.(map[string]any)
				if src["key"] != key {
					continue
				}
				t := Target{Key: key, Website: src["kind"] == "website"}
				t.Project, _ = proj["id"].(string)
				tz, _ := proj["timezone"].(string)
				loc, err := time.LoadLocation(tz)
				if err != nil {
					return nil, Target{}, fmt.Errorf("cannot load the project's time zone %q: %w", tz, err)
				}
				t.Timezone = loc
				origins, _ := src["allowedOrigins"].([]any)
				for i := len(origins) - 1; i >= 0; i-- { // the first https one, else the first
					if o, _ := origins[i].(string); strings.HasPrefix(o, "https://") || (t.Origin == "" && i == 0) {
						t.Origin = o
					}
				}
				actions, _ := proj["actions"].([]any)
				for i, g := range soakGoals {
					actions = append(actions, map[string]any{"id": g.id, "name": g.name, "role": g.role,
						"description": "Added by bench:soak to count every " + eventNames[i] + " event",
						"match":       map[string]any{"event": eventNames[i]}})
				}
				proj["actions"] = actions
				out, err := json.MarshalIndent(doc, "", "  ")
				if err != nil {
					return nil, Target{}, fmt.Errorf("cannot write the soak's provisioning file: %w", err)
				}
				return out, t, nil
			}
		}
	}
	return nil, Target{}, fmt.Errorf("no source of the provisioning file has the key given")
}
