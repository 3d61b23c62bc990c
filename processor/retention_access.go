package processor

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/catalog"
)

// Recent-access records (the reporting API's record of each call, kept
// per user: api/access.go, docs/reporting-api.md "Recent access") follow
// the rule of the history: an object older than the longest retention of
// the user's organizations (30 days for a user in none) plus
// RetentionGrace is deleted. Their layout is the API's:
// reporting/access/<user>/<unix nanoseconds, 20 digits>-<process>.jsonl,
// one object per flush, named by when it was written.

// accessRecordsPrefix is where the reporting API keeps access records.
const accessRecordsPrefix = "reporting/access/"

// retainAccess deletes the access records past their users' retention;
// it returns how many objects went.
func retainAccess(ctx context.Context, b storage.Bucket, st *catalog.State, now time.Time, grace time.Duration) (int, error) {
	days := map[string]int{}
	keep := func(user string) int {
		if d, ok := days[user]; ok {
			return d
		}
		d := catalog.RetentionDays("")
		for _, o := range st.UserOrganizations(user) {
			d = max(d, catalog.RetentionDays(o.Plan))
		}
		days[user] = d
		return d
	}
	var doomed []string
	err := b.List(ctx, accessRecordsPrefix, func(o storage.ObjectInfo) error {
		user, name, ok := strings.Cut(strings.TrimPrefix(o.Key, accessRecordsPrefix), "/")
		if !ok {
			return nil
		}
		stamp, _, ok := strings.Cut(name, "-")
		ns, err := strconv.ParseInt(stamp, 10, 64)
		if !ok || err != nil {
			return nil // not a record: not ours to judge
		}
		limit := now.Add(-time.Duration(keep(user))*24*time.Hour - grace)
		if time.Unix(0, ns).Before(limit) {
			doomed = append(doomed, o.Key)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for i, k := range doomed {
		if err := b.Delete(ctx, k); err != nil {
			return i, err
		}
	}
	return len(doomed), nil
}
