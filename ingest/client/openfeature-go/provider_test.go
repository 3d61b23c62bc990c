package openfeature_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"

	of "github.com/open-feature/go-sdk/openfeature"

	"github.com/mfhq/mf/ingest/client"
	mfof "github.com/mfhq/mf/ingest/client/openfeature-go"
)

// TestProvider resolves the cases of testdata/cases.json through the
// OpenFeature SDK, the provider and the mf client against a running mf
// with the demo project (MF_INGEST, MF_SECRET_KEY; cmd/mf
// TestOpenFeatureGoProvider starts one): value, variant, reason, error
// code and default on error, as the SDK reports them.
func TestProvider(t *testing.T) {
	base, key := os.Getenv("MF_INGEST"), os.Getenv("MF_SECRET_KEY")
	if base == "" || key == "" {
		t.Skip("MF_INGEST and MF_SECRET_KEY are not set (cmd/mf TestOpenFeatureGoProvider runs this against the binary)")
	}
	c, err := client.New(client.DefaultConfig(base, key))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	defer c.Close(ctx)
	if err := of.SetProviderAndWait(mfof.NewProvider(c)); err != nil {
		t.Fatal(err)
	}
	defer of.Shutdown()
	cl := of.NewClient("mf-test")

	raw, err := os.ReadFile("testdata/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name, Flag, Type string
		Default          any
		Context          map[string]any
		Want             struct {
			Value                      any
			Variant, Reason, ErrorCode string
			Metadata                   map[string]any
		}
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		ec := of.NewTargetlessEvaluationContext(c.Context)
		var value any
		var d of.EvaluationDetails
		switch c.Type {
		case "bool":
			r, _ := cl.BooleanValueDetails(ctx, c.Flag, c.Default.(bool), ec)
			value, d = r.Value, r.EvaluationDetails
		case "string":
			r, _ := cl.StringValueDetails(ctx, c.Flag, c.Default.(string), ec)
			value, d = r.Value, r.EvaluationDetails
		case "float":
			r, _ := cl.FloatValueDetails(ctx, c.Flag, c.Default.(float64), ec)
			value, d = r.Value, r.EvaluationDetails
		case "int":
			r, _ := cl.IntValueDetails(ctx, c.Flag, int64(c.Default.(float64)), ec)
			value, d = float64(r.Value), r.EvaluationDetails
		case "object":
			r, _ := cl.ObjectValueDetails(ctx, c.Flag, c.Default, ec)
			value, d = r.Value, r.EvaluationDetails
		}
		if !reflect.DeepEqual(value, c.Want.Value) {
			t.Errorf("%s: value %#v, want %#v", c.Name, value, c.Want.Value)
		}
		if d.Variant != c.Want.Variant || string(d.Reason) != c.Want.Reason || string(d.ErrorCode) != c.Want.ErrorCode {
			t.Errorf("%s: variant %q reason %q error %q (%s), want %q %q %q", c.Name, d.Variant, d.Reason, d.ErrorCode, d.ErrorMessage,
				c.Want.Variant, c.Want.Reason, c.Want.ErrorCode)
		}
		if rule, ok := c.Want.Metadata["rule"]; ok {
			if got, _ := d.FlagMetadata.GetInt("rule"); float64(got) != rule.(float64) {
				t.Errorf("%s: rule %v, want %v", c.Name, d.FlagMetadata, rule)
			}
		}
		if d.FlagKey != c.Flag {
			t.Errorf("%s: flag key %q", c.Name, d.FlagKey)
		}
	}
}
