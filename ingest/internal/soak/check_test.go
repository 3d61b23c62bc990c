package main

import "testing"

// TestCheck replays testdata/check.json: what the API counts against the
// receipts, per event name in the order of eventNames.
func TestCheck(t *testing.T) {
	var cases []struct {
		Name                string
		Got, Sent           Counts
		Partial, Unanswered int64
		Want                string
	}
	readCases(t, "testdata/check.json", &cases)
	for _, c := range cases {
		if got := Check(c.Got, c.Sent, c.Partial, c.Unanswered); got != c.Want {
			t.Errorf("%s:\n got %q\nwant %q", c.Name, got, c.Want)
		}
	}
}

// TestParseGoals reads a goal list as the reporting API writes it (the
// JSON:API shape of docs/reporting-api.md) and refuses one without a
// soak goal.
func TestParseGoals(t *testing.T) {
	body := `{"data":[
	 {"id":"e3f4a5b6-c7d8-4e9f-8a1b-2c3d4e5f6a06","type":"goals","attributes":{"name":"Purchase","conversions":61}},
	 {"id":"50a50a50-0000-4000-8000-000000000001","type":"goals","attributes":{"conversions":700}},
	 {"id":"50a50a50-0000-4000-8000-000000000002","type":"goals","attributes":{"conversions":10}},
	 {"id":"50a50a50-0000-4000-8000-000000000003","type":"goals","attributes":{"conversions":200}},
	 {"id":"50a50a50-0000-4000-8000-000000000004","type":"goals","attributes":{"conversions":60}},
	 {"id":"50a50a50-0000-4000-8000-000000000005","type":"goals","attributes":{"conversions":0}}],
	 "meta":{"active":5}}`
	got, err := parseGoals([]byte(body))
	if err != nil || got != (Counts{700, 10, 200, 60, 0}) {
		t.Errorf("parseGoals: %v %v", got, err)
	}
	if _, err := parseGoals([]byte(`{"data":[{"id":"50a50a50-0000-4000-8000-000000000001","attributes":{"conversions":1}}]}`)); err == nil {
		t.Error("parseGoals took a list without most soak goals")
	}
}
