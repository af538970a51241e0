# Answers with what a Rack app reads of the request as Puma built its env: every HTTP_* key, and
# Rack::Request's scheme, ssl? and port (which read X-Forwarded-Proto/-Scheme/-Ssl/-Port).
require 'json'
require 'rack'

run lambda { |env|
  req = Rack::Request.new(env)
  seen = env.select { |k, _| k.start_with?('HTTP_') }
  seen['rack.scheme'] = req.scheme
  seen['rack.ssl'] = req.ssl?
  seen['rack.port'] = req.port
  [200, { 'content-type' => 'application/json' }, [JSON.generate(seen)]]
}
