package httpapi

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	apispec "github.com/stockguard/shop/api"
)

// TestProblemTypesDocumented: the Problem schema of api/openapi.yaml lists
// exactly the problem types the shop answers with.
func TestProblemTypesDocumented(t *testing.T) {
	var spec struct {
		Components struct {
			Schemas struct {
				Problem struct {
					Properties struct {
						Type struct {
							Enum []string `yaml:"enum"`
						} `yaml:"type"`
					} `yaml:"properties"`
				} `yaml:"Problem"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(apispec.OpenAPI, &spec); err != nil {
		t.Fatal(err)
	}
	documented := slices.Sorted(slices.Values(spec.Components.Schemas.Problem.Properties.Type.Enum))
	if served := slices.Sorted(maps.Keys(problems)); !slices.Equal(documented, served) {
		t.Errorf("api/openapi.yaml lists problem types %q, the shop has %q", documented, served)
	}
}

// TestProblemJSON: a problem's hand-made JSON is what encoding/json
// writes, byte for byte, escapes, empty fields and lists included.
func TestProblemJSON(t *testing.T) {
	n := 7
	for _, p := range []Problem{
		{Type: "sold-out", Title: "Not enough stock", Status: 409, Detail: `not enough stock of "a<b>&c"`, Instance: "/api/v1/orders", SKUs: []string{"a<b>&c", "é\u2028\x01"}},
		{Type: "busy", Title: "Busy, try again", Status: 503},
		{Type: "stale", Title: "x", Status: 409, Detail: "tab\there", Available: &n},
		{Type: "sold-out", Title: "y", Status: 409, SKUs: []string{}},
	} {
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.appendJSON(nil); string(got) != string(want) {
			t.Errorf("appendJSON:\n got %s\nwant %s", got, want)
		}
	}
}
