package httpapi_test

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/stockguard/shop/api"
	"github.com/stockguard/shop/internal/httpapi"
)

// TestOpenAPIMatchesRouter: every route the router registers is in
// api/openapi.yaml, and the spec lists no route the router lacks.
func TestOpenAPIMatchesRouter(t *testing.T) {
	var spec struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(api.OpenAPI, &spec); err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	documented := map[string]bool{}
	for path, item := range spec.Paths {
		for method := range item {
			if method != "parameters" {
				documented[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	param := regexp.MustCompile(`:([a-z_]+)`)
	served := map[string]bool{}
	for _, r := range httpapi.New(httpapi.Config{}).Routes() {
		served[r.Method+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}
	for _, route := range slices.Sorted(maps.Keys(served)) {
		if !documented[route] {
			t.Errorf("%s is served but not in api/openapi.yaml", route)
		}
	}
	for _, route := range slices.Sorted(maps.Keys(documented)) {
		if !served[route] {
			t.Errorf("%s is in api/openapi.yaml but not served", route)
		}
	}
	if len(served) < 8 {
		t.Errorf("only %d routes served: %v", len(served), served)
	}
}
