package api

import (
	"cmp"
	"encoding/binary"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/mfhq/mf/storage/catalog"
)

// PageSize is the fixed page size of paged lists.
const PageSize = 50

var reProjectID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// visibleProject is a project the caller may read, with its organization.
type visibleProject struct {
	p   *catalog.Project
	org *catalog.Organization
}

// visibleProjects lists every project of every organization the user
// belongs to, oldest first (unknown creation time last, then by id).
func visibleProjects(st *catalog.State, user string) []visibleProject {
	var out []visibleProject
	for _, o := range st.UserOrganizations(user) {
		for _, p := range st.Projects(o.ID) {
			out = append(out, visibleProject{p: p, org: o})
		}
	}
	slices.SortFunc(out, func(a, b visibleProject) int { return compareProjects(a.p, b.p) })
	return out
}

func compareProjects(a, b *catalog.Project) int {
	switch {
	case a.CreatedAt != nil && b.CreatedAt != nil:
		if c := a.CreatedAt.Compare(*b.CreatedAt); c != 0 {
			return c
		}
	case a.CreatedAt != nil:
		return -1
	case b.CreatedAt != nil:
		return 1
	}
	return cmp.Compare(a.ID, b.ID)
}

// projectFor finds the project of the path for the caller: 404 for a slug,
// an unknown id or a project outside the caller's organizations, with the
// same message for all three so that ids of other organizations are not
// revealed.
func (r *Reporting) projectFor(c *fiber.Ctx) (visibleProject, error) {
	id := c.Params("project_id")
	notFound := refuse(fiber.StatusNotFound, "project_not_found", "",
		"no project with id "+strconvQuote(id)+" among your organizations' projects; the API takes the project's UUID, not its slug")
	if !reProjectID.MatchString(id) {
		return visibleProject{}, notFound
	}
	st := r.deps.Catalog.State()
	p, ok := st.Project(id)
	if !ok {
		return visibleProject{}, notFound
	}
	for _, o := range st.UserOrganizations(caller(c).user.ID) {
		if o.ID == p.Organization {
			return visibleProject{p: p, org: o}, nil
		}
	}
	return visibleProject{}, notFound
}

// strconvQuote quotes an id from the path for a message, cut short.
func strconvQuote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strconv.Quote(s)
}

func timeFromNanos(n int64) time.Time { return time.Unix(0, n) }

// projectResource is the Project resource object.
func (r *Reporting) projectResource(c *fiber.Ctx, vp visibleProject) Resource {
	p, o := vp.p, vp.org
	loc := p.Location()
	return Resource{
		ID: p.ID, Type: "projects", Self: r.baseURL(c) + "/projects/" + p.ID,
		Attributes: []Attr{
			{"name", p.Name},
			{"slug", p.Slug},
			{"timezone", p.Timezone},
			{"reportingCurrency", p.ReportingCurrency},
			{"archived", p.Archived},
			{"createdAt", momentOrNil(p.CreatedAt, loc)},
			{"organization", map[string]string{"id": o.ID, "slug": o.Slug, "name": o.Name}},
			{"plan", o.Plan},
			{"retentionDays", catalog.RetentionDays(o.Plan)},
		},
	}
}

// listProjects answers GET /projects: 50 per page, oldest first, archived
// included. The cursor holds the sort key of the last project handed out,
// so projects added or removed meanwhile neither repeat nor skip others.
func (r *Reporting) listProjects(c *fiber.Ctx) error {
	all := visibleProjects(r.deps.Catalog.State(), caller(c).user.ID)
	const list = "projects"
	params := Bind("user", caller(c).user.ID)
	start := 0
	if cur := c.Query("cursor"); cur != "" {
		pos, ok := r.cursors.Open(list, params, cur)
		if !ok || len(pos) < 9 {
			return unprocessable("cursor", "this cursor was not handed out by the project list; follow links.next or pass meta.nextCursor unchanged")
		}
		after := catalog.Project{ID: string(pos[9:])}
		if pos[0] == 1 {
			t := timeFromNanos(int64(binary.BigEndian.Uint64(pos[1:9])))
			after.CreatedAt = &t
		}
		start = len(all)
		for i, vp := range all {
			if compareProjects(vp.p, &after) > 0 {
				start = i
				break
			}
		}
	}
	end := min(start+PageSize, len(all))
	page := all[start:end]
	data := make([]Resource, 0, len(page))
	for _, vp := range page {
		data = append(data, r.projectResource(c, vp))
	}
	base := r.baseURL(c) + "/projects"
	self := base
	if cur := c.Query("cursor"); cur != "" {
		self += "?cursor=" + url.QueryEscape(cur)
	}
	links := &Links{Self: self}
	var next any
	if end < len(all) {
		last := page[len(page)-1].p
		pos := make([]byte, 9, 9+len(last.ID))
		if last.CreatedAt != nil {
			pos[0] = 1
			binary.BigEndian.PutUint64(pos[1:9], uint64(last.CreatedAt.UnixNano()))
		}
		pos = append(pos, last.ID...)
		cur := r.cursors.Seal(list, params, pos)
		n := base + "?cursor=" + cur
		links.Next = &n
		next = cur
	}
	return sendDocument(c, fiber.StatusOK, Document{
		Data:  data,
		Meta:  map[string]any{"perPage": PageSize, "nextCursor": next, "total": len(all)},
		Links: links,
	})
}

// getProject answers GET /projects/{project_id}, with fields[projects].
func (r *Reporting) getProject(c *fiber.Ctx) error {
	vp, err := r.projectFor(c)
	if err != nil {
		return err
	}
	res := r.projectResource(c, vp)
	if res.Attributes, err = sparse(c, "projects", res.Attributes); err != nil {
		return err
	}
	return sendDocument(c, fiber.StatusOK, Document{Data: res})
}
