package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// dashboardBudgetMs is issue 20's target: the overview drawn within 1 s of
// navigation.
const dashboardBudgetMs = 1000

// timeDashboard loads the dashboard's overview (30d, compared) in headless
// Chromium n times through api/dashboard/e2e/measure.mjs and prints the
// time from navigation to the page's ready mark.
func timeDashboard(ctx context.Context, apiBase, project string, n int, out io.Writer) error {
	dir := dashboardE2EDir()
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("cannot time the dashboard: node is not installed")
	}
	origin := strings.TrimSuffix(apiBase, "/api/v1")
	cmd := exec.CommandContext(ctx, node, "measure.mjs", origin, benchAPIKey, project, fmt.Sprint(n))
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("cannot time the dashboard (npm ci in %s?): %v\n%s", dir, err, stderr.String())
	}
	var res struct {
		Cold int   `json:"cold"`
		Warm []int `json:"warm"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Warm) == 0 {
		return fmt.Errorf("cannot read measure.mjs's answer %q: %v", raw, err)
	}
	slices.Sort(res.Warm)
	p50, worst := res.Warm[len(res.Warm)/2], res.Warm[len(res.Warm)-1]
	verdict := "within"
	if res.Cold > dashboardBudgetMs || worst > dashboardBudgetMs {
		verdict = "OVER"
	}
	fmt.Fprintf(out, "\ndashboard overview (30d, compared) drawn in Chromium, navigation to ready: first load %d ms, then p50 %d ms, max %d ms of %d loads: %s the %d ms budget\n",
		res.Cold, p50, worst, len(res.Warm), verdict, dashboardBudgetMs)
	return nil
}

// dashboardE2EDir is api/dashboard/e2e from this file's source.
func dashboardE2EDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("api", "dashboard", "e2e")
	}
	// internal/bench/report -> the repository root -> api/dashboard/e2e
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "api", "dashboard", "e2e")
}
