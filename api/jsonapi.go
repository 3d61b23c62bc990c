package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// The JSON:API layer of the reporting API: documents, errors, moments,
// money and sparse fieldsets (docs/reporting-api.md).

// jsonAPIType is the media type of every reporting answer, whatever Accept
// says.
const jsonAPIType = "application/vnd.api+json"

// Time layouts. Moments carry milliseconds; period bounds and trend bucket
// starts do not. Both always write a numeric offset (+00:00, never Z).
const (
	momentLayout = "2006-01-02T15:04:05.000-07:00"
	boundLayout  = "2006-01-02T15:04:05-07:00"
)

// Moment formats t in loc with milliseconds and offset.
func Moment(t time.Time, loc *time.Location) string { return t.In(loc).Format(momentLayout) }

// Bound formats t in loc without milliseconds, with offset.
func Bound(t time.Time, loc *time.Location) string { return t.In(loc).Format(boundLayout) }

// momentOrNil is Moment for an optional time: nil when t is nil.
func momentOrNil(t *time.Time, loc *time.Location) any {
	if t == nil {
		return nil
	}
	return Moment(*t, loc)
}

// Money is an amount in one currency. Amounts of different currencies are
// never added.
type Money struct {
	Currency string  `json:"currency"`
	Amount   float64 `json:"amount"`
}

// MoneyList turns per-currency amounts into the answer's array: the
// reporting currency first (when present), then the others by currency
// code. Never nil, so it encodes as [].
func MoneyList(amounts map[string]float64, reporting string) []Money {
	out := make([]Money, 0, len(amounts))
	for cur, amt := range amounts {
		out = append(out, Money{Currency: cur, Amount: amt})
	}
	slices.SortFunc(out, func(a, b Money) int {
		switch {
		case a.Currency == b.Currency:
			return 0
		case a.Currency == reporting:
			return -1
		case b.Currency == reporting:
			return 1
		}
		return strings.Compare(a.Currency, b.Currency)
	})
	return out
}

// Resource is a JSON:API resource object. Attributes is an ordered list so
// that answers are stable and sparse fieldsets can drop members.
type Resource struct {
	ID         string
	Type       string
	Attributes []Attr
	Self       string // links.self; empty when not addressable
	Meta       map[string]any
}

// Attr is one attribute of a resource.
type Attr struct {
	Name  string
	Value any
}

// MarshalJSON writes the resource with attributes in their order.
func (r Resource) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"id":`)
	if err := writeJSON(&b, r.ID); err != nil {
		return nil, err
	}
	b.WriteString(`,"type":`)
	if err := writeJSON(&b, r.Type); err != nil {
		return nil, err
	}
	b.WriteString(`,"attributes":{`)
	for i, a := range r.Attributes {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writeJSON(&b, a.Name); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := writeJSON(&b, a.Value); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	if r.Self != "" {
		b.WriteString(`,"links":{"self":`)
		if err := writeJSON(&b, r.Self); err != nil {
			return nil, err
		}
		b.WriteByte('}')
	}
	if r.Meta != nil {
		b.WriteString(`,"meta":`)
		if err := writeJSON(&b, r.Meta); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeJSON encodes v without escaping HTML characters (URLs and names are
// written unescaped) and without the encoder's trailing newline.
func writeJSON(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1)
	return nil
}

// Links are a paged list's top-level links; Next nil encodes as null.
type Links struct {
	Self string  `json:"self"`
	Next *string `json:"next"`
}

// Document is a JSON:API top-level document. Data is a Resource or a
// []Resource.
type Document struct {
	Data  any            `json:"data"`
	Meta  map[string]any `json:"meta,omitempty"`
	Links *Links         `json:"links,omitempty"`
}

// sendDocument writes a successful answer.
func sendDocument(c *fiber.Ctx, status int, doc Document) error {
	var b bytes.Buffer
	if err := writeJSON(&b, doc); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, jsonAPIType)
	return c.Status(status).Send(b.Bytes())
}

// APIError is a refusal: the status and a human-readable detail. Handlers
// return it; the error handler writes it as a JSON:API errors document.
type APIError struct {
	Status int
	// Code is a stable machine-readable word (for example
	// "invalid_parameter").
	Code string
	// Detail says what was refused and why, for a person.
	Detail string
	// Parameter names the query parameter at fault, when there is one.
	Parameter string
}

func (e *APIError) Error() string { return e.Detail }

// refuse builds an APIError.
func refuse(status int, code, param, detail string) *APIError {
	return &APIError{Status: status, Code: code, Parameter: param, Detail: detail}
}

// badParam is the 400 refusal of a malformed or misused parameter.
func badParam(param, detail string) *APIError {
	return refuse(fiber.StatusBadRequest, "invalid_parameter", param, detail)
}

// unprocessable is the 422 refusal the specification names.
func unprocessable(param, detail string) *APIError {
	return refuse(fiber.StatusUnprocessableEntity, "unprocessable_parameter", param, detail)
}

// sendError writes a JSON:API errors document.
func sendError(c *fiber.Ctx, e *APIError) error {
	type source struct {
		Parameter string `json:"parameter"`
	}
	type errObj struct {
		Status string  `json:"status"`
		Code   string  `json:"code"`
		Title  string  `json:"title"`
		Detail string  `json:"detail"`
		Source *source `json:"source,omitempty"`
	}
	o := errObj{Status: strconv.Itoa(e.Status), Code: e.Code, Title: http.StatusText(e.Status), Detail: e.Detail}
	if e.Parameter != "" {
		o.Source = &source{Parameter: e.Parameter}
	}
	var b bytes.Buffer
	if err := writeJSON(&b, map[string]any{"errors": []errObj{o}}); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, jsonAPIType)
	return c.Status(e.Status).Send(b.Bytes())
}

// sparse applies a `fields[<type>]` sparse fieldset to attrs. Without the
// parameter every attribute is kept; an empty list keeps none; a name the
// type does not have is refused.
func sparse(c *fiber.Ctx, typ string, attrs []Attr) ([]Attr, error) {
	param := "fields[" + typ + "]"
	raw := c.Context().QueryArgs().Peek(param)
	if raw == nil {
		return attrs, nil
	}
	want := map[string]bool{}
	for _, f := range strings.Split(string(raw), ",") {
		if f = strings.TrimSpace(f); f != "" {
			want[f] = true
		}
	}
	out := make([]Attr, 0, len(want))
	for _, a := range attrs {
		if want[a.Name] {
			out = append(out, a)
			delete(want, a.Name)
		}
	}
	if len(want) > 0 {
		unknown := make([]string, 0, len(want))
		for f := range want {
			unknown = append(unknown, f)
		}
		slices.Sort(unknown)
		return nil, badParam(param, "the "+typ+" resource has no attribute "+strings.Join(unknown, ", ")+
			"; list attribute names separated by commas")
	}
	return out, nil
}

// queryOf returns the request's query parameters, every value of a
// repeated parameter kept in order (the one reading of the query string
// for every endpoint).
func queryOf(c *fiber.Ctx) url.Values {
	q := url.Values{}
	c.Context().QueryArgs().VisitAll(func(k, v []byte) {
		q.Add(string(k), string(v))
	})
	return q
}
