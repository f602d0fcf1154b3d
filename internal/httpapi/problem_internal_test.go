package httpapi

import (
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
