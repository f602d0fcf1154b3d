package shop_test

import (
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

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
