package lua

// BetweenLines has l run f before each line of a saga.
func BetweenLines(l *Lua, f func(line int)) { l.hooks.betweenLines = f }

// Home is the bucket of sku that user tries first under l.
func Home(l *Lua, sku, user string) string { return l.route(sku, user)[0] }

// CartPlaced has l run f once a batch of carts has committed, before
// their sagas end their lines' reservations.
func CartPlaced(l *Lua, f func()) { l.hooks.cartPlaced = f }
