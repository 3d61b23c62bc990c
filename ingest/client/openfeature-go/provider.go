package openfeature

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mfhq/mf/ingest/client"
	of "github.com/open-feature/go-sdk/openfeature"
)

// Provider resolves flags through an mf client.
type Provider struct {
	c *client.Client
}

// NewProvider returns a provider over c (client.New with a secret key).
func NewProvider(c *client.Client) *Provider { return &Provider{c: c} }

// Metadata names the provider.
func (p *Provider) Metadata() of.Metadata { return of.Metadata{Name: "mf"} }

// Hooks returns none.
func (p *Provider) Hooks() []of.Hook { return nil }

// facts maps an evaluation context to the client's facts.
func facts(ec of.FlattenedContext) client.Facts {
	f := client.Facts{Properties: map[string]any{}}
	for k, v := range ec {
		switch k {
		case "anonymousId":
			f.AnonymousID, _ = v.(string)
		case "userId":
			f.UserID, _ = v.(string)
		case of.TargetingKey:
		default:
			f.Properties[k] = v
		}
	}
	if tk, ok := ec[of.TargetingKey].(string); ok && f.UserID == "" {
		f.UserID = tk
	}
	return f
}

// resolve evaluates key and returns the decision, or the resolution error
// that sends the caller to its default.
func (p *Provider) resolve(ctx context.Context, key string, ec of.FlattenedContext) (client.Decision, of.ProviderResolutionDetail) {
	d, err := p.c.Evaluate(ctx, key, facts(ec))
	switch {
	case errors.Is(err, client.ErrFlagNotFound):
		return d, errorDetail(of.NewFlagNotFoundResolutionError(err.Error()))
	case errors.Is(err, client.ErrNoDocument) || errors.Is(err, client.ErrStopped):
		return d, errorDetail(of.NewProviderNotReadyResolutionError(err.Error()))
	case err != nil:
		return d, errorDetail(of.NewGeneralResolutionError(err.Error()))
	}
	if d.Reason == "ERROR" {
		switch d.ErrorCode {
		case "NOT_READY":
			return d, errorDetail(of.NewProviderNotReadyResolutionError("mf: NOT_READY"))
		case "PARSE_ERROR":
			return d, errorDetail(of.NewParseErrorResolutionError("mf: PARSE_ERROR"))
		}
		return d, errorDetail(of.NewGeneralResolutionError("mf: " + d.ErrorCode))
	}
	detail := of.ProviderResolutionDetail{Reason: of.Reason(d.Reason), Variant: d.Variant}
	if d.Rule >= 0 {
		detail.FlagMetadata = of.FlagMetadata{"rule": d.Rule}
	}
	return d, detail
}

func errorDetail(e of.ResolutionError) of.ProviderResolutionDetail {
	return of.ProviderResolutionDetail{ResolutionError: e, Reason: of.ErrorReason}
}

func mismatch(d client.Decision, kind string) of.ProviderResolutionDetail {
	return errorDetail(of.NewTypeMismatchResolutionError(fmt.Sprintf("mf: variant %s has no %s value", d.Variant, kind)))
}

// BooleanEvaluation: a boolean value, else the variants on and off.
func (p *Provider) BooleanEvaluation(ctx context.Context, key string, def bool, ec of.FlattenedContext) of.BoolResolutionDetail {
	d, det := p.resolve(ctx, key, ec)
	if det.Error() != nil {
		return of.BoolResolutionDetail{Value: def, ProviderResolutionDetail: det}
	}
	var v bool
	if json.Unmarshal(d.Value, &v) != nil {
		switch d.Variant {
		case "on":
			v = true
		case "off":
			v = false
		default:
			return of.BoolResolutionDetail{Value: def, ProviderResolutionDetail: mismatch(d, "boolean")}
		}
	}
	return of.BoolResolutionDetail{Value: v, ProviderResolutionDetail: det}
}

// StringEvaluation: a string value, else the variant.
func (p *Provider) StringEvaluation(ctx context.Context, key string, def string, ec of.FlattenedContext) of.StringResolutionDetail {
	d, det := p.resolve(ctx, key, ec)
	if det.Error() != nil {
		return of.StringResolutionDetail{Value: def, ProviderResolutionDetail: det}
	}
	v := d.Variant
	_ = json.Unmarshal(d.Value, &v)
	return of.StringResolutionDetail{Value: v, ProviderResolutionDetail: det}
}

// FloatEvaluation: a number value.
func (p *Provider) FloatEvaluation(ctx context.Context, key string, def float64, ec of.FlattenedContext) of.FloatResolutionDetail {
	d, det := p.resolve(ctx, key, ec)
	if det.Error() != nil {
		return of.FloatResolutionDetail{Value: def, ProviderResolutionDetail: det}
	}
	var v float64
	if json.Unmarshal(d.Value, &v) != nil {
		return of.FloatResolutionDetail{Value: def, ProviderResolutionDetail: mismatch(d, "number")}
	}
	return of.FloatResolutionDetail{Value: v, ProviderResolutionDetail: det}
}

// IntEvaluation: an integer value.
func (p *Provider) IntEvaluation(ctx context.Context, key string, def int64, ec of.FlattenedContext) of.IntResolutionDetail {
	d, det := p.resolve(ctx, key, ec)
	if det.Error() != nil {
		return of.IntResolutionDetail{Value: def, ProviderResolutionDetail: det}
	}
	var v int64
	if json.Unmarshal(d.Value, &v) != nil {
		return of.IntResolutionDetail{Value: def, ProviderResolutionDetail: mismatch(d, "integer")}
	}
	return of.IntResolutionDetail{Value: v, ProviderResolutionDetail: det}
}

// ObjectEvaluation: the value, decoded from JSON.
func (p *Provider) ObjectEvaluation(ctx context.Context, key string, def any, ec of.FlattenedContext) of.InterfaceResolutionDetail {
	d, det := p.resolve(ctx, key, ec)
	if det.Error() != nil {
		return of.InterfaceResolutionDetail{Value: def, ProviderResolutionDetail: det}
	}
	var v any
	if len(d.Value) == 0 || json.Unmarshal(d.Value, &v) != nil {
		return of.InterfaceResolutionDetail{Value: def, ProviderResolutionDetail: mismatch(d, "JSON")}
	}
	return of.InterfaceResolutionDetail{Value: v, ProviderResolutionDetail: det}
}

var _ of.FeatureProvider = (*Provider)(nil)
