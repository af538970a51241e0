# A small Rack application that throttles as Mastodon does, on the real libraries: Debian's rack-attack,
# Rack's MethodOverride and session cookie, Rails' ActionDispatch::RemoteIp (and the path normalizer
# Rack::Attack takes from ActionDispatch), Doorkeeper's own token extraction and Warden's session user.
# Written for rategate's differential test (test/differential/rack-attack.test.ts) from the throttle table
# in the shared MASTODON.md notes; the rules are restated here, not copied from Mastodon.
#
# Started by the test with `puma -b tcp://127.0.0.1:PORT -t 1:1 config.ru` and these environment variables:
#   RA_LIMITS  JSON {"throttle name": limit} (the test scales Mastodon's limits down, the same way for both)
#   RA_TOKENS  JSON {"token": owner id or null}: the access tokens that exist (null: an app-only token)
#   RA_BLOCKED JSON ["ip or cidr", ...]: the admin's IP blocks
#   RA_NOW     Unix seconds the clock starts at (the test moves it with POST /__clock?t=SECONDS)
# Control endpoints (before Rack::Attack, never counted): POST /__clock?t=S, POST /__login?user=ID (signs
# a Warden user in and answers the session cookie), POST /__reset (empties Rack::Attack's cache).
require 'json'
require 'ipaddr'
require 'base64'
require 'active_support'
require 'active_support/core_ext/object/blank'
require 'active_support/cache'
require 'action_dispatch'
require 'action_dispatch/middleware/remote_ip'
require 'action_dispatch/journey/router/utils' # Rack::Attack normalizes paths with it when it is loaded
require 'rack/attack'
require 'warden'
# Doorkeeper's token extraction, loadable alone (the rest of Doorkeeper needs a Rails app, its engine and
# an ActiveRecord database): Token.from_request with the access-token methods, on the request wrapped in
# Doorkeeper's Grape decorator, which gives a plain Rack request `authorization` (the header) and
# `parameters` (Rack's params, String keys, while Doorkeeper asks for :access_token / :bearer_token).
require 'doorkeeper/oauth/token'
require 'doorkeeper/grape/authorization_decorator'

LIMITS = JSON.parse(ENV.fetch('RA_LIMITS'))
TOKENS = JSON.parse(ENV.fetch('RA_TOKENS'))
BLOCKED = JSON.parse(ENV.fetch('RA_BLOCKED', '[]')).map { |c| IPAddr.new(c) }

# The one clock Rack::Attack's cache reads (Time.now): fixed, moved only by the test, so both sides'
# windows are the same epoch-aligned windows.
module ControllableClock
  @now = Integer(ENV.fetch('RA_NOW'))
  class << self
    attr_accessor :now
  end
end
class << Time
  alias_method :real_now, :now
  def now
    Time.at(ControllableClock.now)
  end
end

class Rack::Attack::Request
  def remote_ip
    @remote_ip ||= (get_header('action_dispatch.remote_ip') || ip).to_s
  end

  # IPv6 clients share a bucket per /64.
  def throttleable_remote_ip
    @throttleable_remote_ip ||= begin
      addr = IPAddr.new(remote_ip)
      addr.ipv6? ? addr.mask(64).to_s : remote_ip
    end
  end

  # The token Doorkeeper extracts with the access-token methods Mastodon configures (header, then the
  # access_token and bearer_token parameters), when it exists. Token.authenticate would look it up in
  # the database; RA_TOKENS stands for that table.
  def authenticated_token
    return @authenticated_token if defined?(@authenticated_token)
    request = Doorkeeper::Grape::AuthorizationDecorator.new(self)
    raw = Doorkeeper::OAuth::Token.from_request(request, :from_bearer_authorization, :from_access_token_param, :from_bearer_param)
    @authenticated_token = raw.present? && TOKENS.key?(raw) ? raw : nil
  end

  def authenticated_user_id
    owner = authenticated_token && TOKENS[authenticated_token]
    owner || warden_user_id
  end

  def warden_user_id
    get_header('warden')&.user
  end

  def unauthenticated?
    authenticated_user_id.nil?
  end

  def api_request?
    path.start_with?('/api')
  end

  # `/auth` with an optional `.format`, as the Rails routes of Devise take it.
  def path_matches?(other)
    path == other || path.match?(/\A#{Regexp.escape(other)}\.[^.\/]+\z/)
  end

  def paging_request?
    %w[page min_id max_id since_id].any? { |k| params[k].present? }
  end

  def user_email
    user = params['user']
    user.is_a?(Hash) ? user['email'].presence : nil
  end
end

Rack::Attack.cache.store = ActiveSupport::Cache::MemoryStore.new
# Which throttle refused, for the test's report (Mastodon answers the same 429 without it).
Rack::Attack.throttled_responder = lambda do |req|
  [429, { 'content-type' => 'application/json', 'x-throttle' => req.env['rack.attack.matched'].to_s }, ['{"error":"Too many requests"}']]
end

Rack::Attack.safelist('allow from localhost') { |req| %w[127.0.0.1 ::1].include?(req.remote_ip) }
Rack::Attack.blocklist('deny from ip blocks') do |req|
  addr = IPAddr.new(req.remote_ip)
  BLOCKED.any? { |b| b.include?(addr) }
end

def throttle(name, period, &block)
  Rack::Attack.throttle(name, limit: LIMITS.fetch(name), period: period, &block)
end

# The table, in its order (Rack::Attack counts a request in each throttle until one refuses it).
throttle('throttle_authenticated_api', 5 * 60) { |req| req.authenticated_user_id if req.api_request? }
throttle('throttle_per_token_api', 5 * 60) { |req| req.authenticated_token if req.api_request? }
throttle('throttle_unauthenticated_api', 5 * 60) { |req| req.throttleable_remote_ip if req.api_request? && req.unauthenticated? }
throttle('throttle_api_media', 30 * 60) { |req| req.authenticated_user_id if req.post? && req.path.match?(%r{\A/api/v\d+/media\z}i) }
throttle('throttle_media_proxy', 10 * 60) { |req| req.throttleable_remote_ip if req.path.start_with?('/media_proxy') }
throttle('throttle_api_sign_up', 30 * 60) { |req| req.throttleable_remote_ip if req.post? && req.path == '/api/v1/accounts' }
throttle('throttle_authenticated_paging', 15 * 60) { |req| req.authenticated_user_id if req.paging_request? }
throttle('throttle_unauthenticated_paging', 15 * 60) { |req| req.throttleable_remote_ip if req.paging_request? && req.unauthenticated? }
throttle('throttle_api_delete', 30 * 60) do |req|
  deleting = (req.post? && req.path.match?(%r{\A/api/v1/statuses/\d+/unreblog\z})) || (req.delete? && req.path.match?(%r{\A/api/v1/statuses/\d+\z}))
  req.authenticated_user_id if deleting
end
throttle('throttle_sign_up_attempts/ip', 5 * 60) { |req| req.throttleable_remote_ip if req.post? && req.path_matches?('/auth') }
throttle('throttle_password_resets/ip', 5 * 60) { |req| req.throttleable_remote_ip if req.post? && req.path_matches?('/auth/password') }
throttle('throttle_password_resets/email', 30 * 60) { |req| req.user_email if req.post? && req.path_matches?('/auth/password') }
throttle('throttle_email_confirmations/ip', 5 * 60) do |req|
  req.throttleable_remote_ip if req.post? && (req.path_matches?('/auth/confirmation') || req.path == '/api/v1/emails/confirmations')
end
throttle('throttle_email_confirmations/email', 30 * 60) do |req|
  if req.post? && req.path_matches?('/auth/confirmation')
    req.user_email
  elsif req.post? && req.path == '/api/v1/emails/confirmations'
    req.authenticated_user_id
  end
end
throttle('throttle_login_attempts/ip', 5 * 60) { |req| req.throttleable_remote_ip if req.post? && req.path_matches?('/auth/sign_in') }
# The two-factor step posts user[otp_attempt] and no e-mail: Mastodon keys it on the session's pending user first.
throttle('throttle_login_attempts/email', 60 * 60) do |req|
  (req.session[:attempt_user_id] || req.user_email) if req.post? && req.path_matches?('/auth/sign_in')
end
throttle('throttle_password_change/account', 10 * 60) do |req|
  req.authenticated_user_id if req.put? || (req.patch? && req.path_matches?('/auth'))
end

# The test's handles on the clock, the session and the cache; in front of Rack::Attack, never counted.
class Control
  def initialize(app)
    @app = app
  end

  def call(env)
    req = Rack::Request.new(env)
    case req.path_info
    when '/__clock'
      ControllableClock.now = Integer(req.params.fetch('t'))
      [204, {}, []]
    when '/__login'
      env['warden'].set_user(req.params.fetch('user'))
      [204, {}, []]
    when '/__pending'
      req.session[:attempt_user_id] = req.params.fetch('user')
      [204, {}, []]
    when '/__reset'
      Rack::Attack.reset!
      [204, {}, []]
    else
      @app.call(env)
    end
  end
end

Warden::Manager.serialize_into_session { |user| user }
Warden::Manager.serialize_from_session { |id| id }

use Rack::MethodOverride
use ActionDispatch::RemoteIp # Rails' default trusted proxies: loopback and the private ranges
use Rack::Session::Cookie, key: '_mastodon_session', secret: 'x' * 64, same_site: :lax
use Warden::Manager
use Control
use Rack::Attack
run lambda { |env|
  [200, { 'content-type' => 'application/json', 'x-method' => env['REQUEST_METHOD'] }, ['{}']]
}
