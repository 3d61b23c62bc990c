package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// readCounts asks GET /api/v1/projects/{project}/goals for the days from
// the first to the last of the run (custom period, the project's days)
// and returns the conversions of the soak's goals. A 429 is returned as
// errRateLimited with the wait the API asked for.
func readCounts(ctx context.Context, client *http.Client, api, token string, t Target, from, to time.Time) (Counts, error) {
	q := url.Values{"period": {"custom"},
		"from": {from.In(t.Timezone).Format(time.DateOnly)}, "to": {to.In(t.Timezone).Format(time.DateOnly)}}
	u := api + "/api/v1/projects/" + t.Project + "/goals?" + q.Encode()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return Counts{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return Counts{}, fmt.Errorf("cannot ask the reporting API for the goals: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Counts{}, fmt.Errorf("cannot read the reporting API's goals: %w", err)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return Counts{}, rateLimited{wait: time.Duration(max(secs, 1)) * time.Second}
	}
	if resp.StatusCode != http.StatusOK {
		return Counts{}, fmt.Errorf("the reporting API answered the goals with %d: %s", resp.StatusCode, clip(body))
	}
	return parseGoals(body)
}

// rateLimited is the reporting API's 429.
type rateLimited struct{ wait time.Duration }

func (r rateLimited) Error() string {
	return fmt.Sprintf("the reporting API's rate limit: retry after %v", r.wait)
}

// parseGoals reads the conversions of the soak's goals from a goal list;
// each must be there.
func parseGoals(body []byte) (Counts, error) {
	var doc struct {
		Data []struct {
			ID         string `json:"id"`
			Attributes struct {
				Conversions *int64 `json:"conversions"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return Counts{}, fmt.Errorf("cannot parse the reporting API's goals: %w", err)
	}
	var c Counts
	for i, g := range soakGoals {
		found := false
		for _, d := range doc.Data {
			if d.ID == g.id && d.Attributes.Conversions != nil {
				c[i], found = *d.Attributes.Conversions, true
			}
		}
		if !found {
			return Counts{}, fmt.Errorf("the reporting API's goals lack the soak's goal %q (%s)", g.name, g.id)
		}
	}
	return c, nil
}

// Check compares what the reporting API counts with what mf accepted.
// sent are the events per name of batches accepted whole; partial the
// events accepted from batches of which mf dropped some (names unknown);
// unanswered the events of batches never answered 202, which may or may
// not be stored. It returns "" when the counts agree, else what differs.
func Check(got, sent Counts, partial, unanswered int64) string {
	var diffs []string
	total, want := got.Total(), sent.Total()+partial
	switch {
	case total < want:
		diffs = append(diffs, fmt.Sprintf("the API counts %d events, %d fewer than the %d accepted", total, want-total, want))
	case total > want+unanswered:
		diffs = append(diffs, fmt.Sprintf("the API counts %d events, %d more than the %d accepted (and %d sent without an answer)",
			total, total-want-unanswered, want, unanswered))
	}
	if partial == 0 && unanswered == 0 {
		for i, n := range eventNames {
			if got[i] != sent[i] {
				diffs = append(diffs, fmt.Sprintf("%s: the API counts %d, %d accepted (%+d)", n, got[i], sent[i], got[i]-sent[i]))
			}
		}
	}
	return strings.Join(diffs, "; ")
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
