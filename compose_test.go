package shop_test

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// TestComposeFile loads docker-compose.yml as docker compose would, schema
// validation included, without an engine.
func TestComposeFile(t *testing.T) {
	// No OS environment: defaults such as ${SHOP_ADMIN_TOKEN:-change-me} apply.
	options, err := cli.NewProjectOptions([]string{"docker-compose.yml"}, cli.WithEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	project, err := options.LoadProject(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"shop", "mysql", "redis", "zookeeper", "etcd"} {
		if _, err := project.GetService(name); err != nil {
			t.Error(err)
		}
	}
	shop, err := project.GetService("shop")
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"SHOP_MYSQL_DSN":   "shop:shop@tcp(mysql:3306)/shop?parseTime=true",
		"SHOP_REDIS_ADDR":  "redis:6379",
		"SHOP_ZK_ADDRS":    "zookeeper:2181",
		"SHOP_ETCD_ADDRS":  "etcd:2379",
		"SHOP_ADMIN_TOKEN": "change-me",
	} {
		if got := shop.Environment[key]; got == nil || *got != want {
			t.Errorf("shop: %s = %v, want %q", key, deref(got), want)
		}
	}
	for _, db := range []string{"mysql", "redis", "zookeeper", "etcd"} {
		if dep, ok := shop.DependsOn[db]; !ok || dep.Condition != types.ServiceConditionHealthy {
			t.Errorf("shop must wait for %s to be healthy; depends_on: %+v", db, dep)
		}
	}
}

// TestMonitoringProfile: the monitoring profile adds Prometheus, which
// scrapes the shop's debug listener, and Grafana with the dashboard, whose
// every shop_ metric is one the shop defines.
func TestMonitoringProfile(t *testing.T) {
	options, err := cli.NewProjectOptions([]string{"docker-compose.yml"}, cli.WithEnv(nil), cli.WithProfiles([]string{"monitoring"}))
	if err != nil {
		t.Fatal(err)
	}
	project, err := options.LoadProject(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"prometheus", "grafana"} {
		if _, err := project.GetService(name); err != nil {
			t.Error(err)
		}
	}
	shop, err := project.GetService("shop")
	if err != nil {
		t.Fatal(err)
	}
	if got := shop.Environment["SHOP_DEBUG_ADDR"]; got == nil || *got != ":6060" {
		t.Errorf("shop: SHOP_DEBUG_ADDR = %v, want :6060, where deploy/prometheus.yml scrapes", deref(got))
	}

	raw, err := os.ReadFile("deploy/grafana/dashboards/shop.json")
	if err != nil {
		t.Fatal(err)
	}
	var dashboard struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dashboard); err != nil {
		t.Fatal(err)
	}
	defined, err := os.ReadFile("internal/metrics/metrics.go")
	if err != nil {
		t.Fatal(err)
	}
	metric := regexp.MustCompile(`shop_[a-z_]+?(_bucket|_sum|_count)?\b`)
	for _, p := range dashboard.Panels {
		for _, target := range p.Targets {
			for _, m := range metric.FindAllStringSubmatch(target.Expr, -1) {
				name := m[0][:len(m[0])-len(m[1])]
				if !regexp.MustCompile(`"` + name + `"`).Match(defined) {
					t.Errorf("panel %q: %s is not a metric of internal/metrics", p.Title, name)
				}
			}
		}
	}
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
