package config

import (
	"log/slog"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/stockguard/shop/internal/db"
)

// LogValue masks the admin token, the JWT and payment secrets and the
// database password.
func (c Config) LogValue() slog.Value {
	attrs := make([]slog.Attr, len(settings))
	for i, s := range settings {
		attrs[i] = slog.String(strings.ToLower(strings.TrimPrefix(s.env, "SHOP_")), Masked(s.env, s.get(c)))
	}
	return slog.GroupValue(attrs...)
}

// secrets masks the value of each secret setting: the database password,
// the admin token and the JWT and payment secrets.
var secrets = map[string]func(string) string{"SHOP_MYSQL_DSN": MaskDSN, "SHOP_ADMIN_TOKEN": mask, "SHOP_JWT_SECRET": mask, "SHOP_PAYMENT_SECRET": mask}

// Masked returns the value v of the setting env as it may be shown: a
// secret masked, every other value as it is.
func Masked(env, v string) string {
	if m, ok := secrets[env]; ok {
		return m(v)
	}
	return v
}

// MaskArgs returns a command line with the values of the secret settings'
// flags masked, --mysql's password among them, for a report to show.
func MaskArgs(args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		if !strings.HasPrefix(out[i], "-") {
			continue
		}
		name, v, inline := strings.Cut(strings.TrimLeft(out[i], "-"), "=")
		j := slices.IndexFunc(settings[:], func(s setting) bool { return s.flag == name })
		if j < 0 || secrets[settings[j].env] == nil {
			continue
		}
		if inline {
			out[i] = strings.TrimSuffix(out[i], v) + Masked(settings[j].env, v)
		} else if i+1 < len(out) {
			i++
			out[i] = Masked(settings[j].env, out[i])
		}
	}
	return out
}

// MaskDSN hides the password in a MySQL DSN. An SQLite DSN is a file name,
// shown as it is.
func MaskDSN(dsn string) string {
	if dsn == "" || strings.HasPrefix(dsn, db.SQLitePrefix) {
		return dsn
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return mask(dsn)
	}
	cfg.Passwd = mask(cfg.Passwd)
	return cfg.FormatDSN()
}

func mask(secret string) string {
	if secret == "" {
		return ""
	}
	return "*****"
}
