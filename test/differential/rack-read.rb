# What Rack (Debian's ruby-rack) reads from raw requests: for a differential test of the gateway's
# body reading. Input on stdin: a JSON array of cases {content_type, method, body_base64, query};
# output on stdout: a JSON array, per case {"post": params, "media_type": ..., "get": params} or
# {"error": "ExceptionClass: message"}. A file part shows as {"__file__": filename}.
require 'json'
require 'base64'
require 'stringio'
require 'rack'

def plain(v)
  case v
  when Hash
    if v.key?(:tempfile) || v.key?('tempfile')
      { '__file__' => (v[:filename] || v['filename']).to_s }
    else
      v.to_h { |k, x| [k.to_s, plain(x)] }
    end
  when Array then v.map { |x| plain(x) }
  when String then v.dup.force_encoding('UTF-8').scrub('?')
  else v
  end
end

cases = JSON.parse($stdin.read)
out = cases.map do |c|
  body = Base64.decode64(c['body_base64'] || '')
  env = {
    'REQUEST_METHOD' => c['method'] || 'POST',
    'PATH_INFO' => '/',
    'QUERY_STRING' => c['query'] || '',
    'rack.input' => StringIO.new(body),
    'CONTENT_LENGTH' => body.bytesize.to_s,
  }
  env['CONTENT_TYPE'] = c['content_type'] if c['content_type']
  req = Rack::Request.new(env)
  begin
    { 'media_type' => req.media_type, 'post' => plain(req.POST), 'get' => plain(req.GET) }
  rescue StandardError, EOFError => e
    { 'error' => "#{e.class}: #{e.message}"[0, 200] }
  end
end
$stdout.write(JSON.generate(out))
