package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
)

// eraseMain runs mf erase: it asks a running mf's admin API to erase a
// person (DELETE /admin/v1/projects/{project}/people/{ref}) and follows
// the erasure until it is done (operations contract section 4).
func eraseMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mf erase", flag.ContinueOnError)
	fs.SetOutput(stderr)
	project := fs.String("project", "", "id of the project (required)")
	person := fs.String("person", "", "ref of the person, or of a browser joined to them (required)")
	adminURL := fs.String("admin-url", envOr("MF_ADMIN_URL", "http://127.0.0.1:8082"), "base URL of the running mf's admin API (env MF_ADMIN_URL)")
	token := fs.String("admin-token", os.Getenv("MF_ADMIN_TOKEN"), "bearer token of the admin API (env MF_ADMIN_TOKEN)")
	wait := fs.Duration("timeout", 10*time.Minute, "how long to wait for the erasure to be done")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: mf erase --project ID --person REF [--admin-url URL]")
		fs.PrintDefaults()
	}
	if code := parseArgs(fs, args, stdout, stderr); code >= 0 {
		return code
	}
	if *project == "" || *person == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	admin := newAdminClient(*adminURL, *token)
	base := "/admin/v1/projects/" + url.PathEscape(*project)
	ans, err := admin.call(ctx, http.MethodDelete, base+"/people/"+url.PathEscape(*person))
	code, body := ans.Code, ans.Body
	if err != nil {
		fmt.Fprintf(stderr, "mf erase: cannot reach the admin API at %s: %v\n", *adminURL, err)
		return 1
	}
	if code != http.StatusAccepted {
		fmt.Fprintf(stderr, "mf erase: %d %s: %s\n", code, http.StatusText(code), adminError(body))
		return 1
	}
	var rec struct{ ID, State string }
	if err := json.Unmarshal(body, &rec); err != nil || rec.ID == "" {
		fmt.Fprintf(stderr, "mf erase: the admin API answered an unreadable erasure: %s\n", body)
		return 1
	}
	fmt.Fprintf(stderr, "erasure %s of person %s requested; waiting until it is done\n", rec.ID, *person)
	ctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		ans, err := admin.call(ctx, http.MethodGet, base+"/erasures/"+rec.ID)
		code, body := ans.Code, ans.Body
		if err != nil {
			fmt.Fprintf(stderr, "mf erase: cannot follow erasure %s: %v (it goes on in mf: GET %s%s/erasures/%s)\n", rec.ID, err, admin.base, base, rec.ID)
			return 1
		}
		if code != http.StatusOK {
			fmt.Fprintf(stderr, "mf erase: %d %s: %s\n", code, http.StatusText(code), adminError(body))
			return 1
		}
		var st struct {
			State  string
			DoneAt *time.Time
			Events int
		}
		if err := json.Unmarshal(body, &st); err != nil {
			fmt.Fprintf(stderr, "mf erase: unreadable erasure record: %s\n", body)
			return 1
		}
		if st.State == "done" {
			fmt.Fprintf(stdout, "erasure %s done at %s: %d stored events erased\n", rec.ID, st.DoneAt.Format(time.RFC3339), st.Events)
			return 0
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "mf erase: erasure %s still %s after %s (it goes on in mf)\n", rec.ID, st.State, *wait)
			return 1
		case <-tick.C:
		}
	}
}
