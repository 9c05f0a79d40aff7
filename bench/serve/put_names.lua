-- wrk script for bench/serve/upload.py: PUT a body to a new name on every request
-- (PREFIX1, PREFIX2, ...), stopping after LIMIT answers so the data written stays bounded.
local counter, done = 0, 0
local limit = tonumber(os.getenv("H15C_LIMIT") or "100000")
local body = string.rep("x", tonumber(os.getenv("H15C_BODY") or "1024"))
local prefix = os.getenv("H15C_PREFIX") or "/new/"
local auth = os.getenv("H15C_AUTH") or ""

request = function()
  counter = counter + 1
  local headers = { ["Content-Type"] = "application/octet-stream" }
  if auth ~= "" then headers["Authorization"] = "Bearer " .. auth end
  return wrk.format("PUT", prefix .. counter, headers, body)
end

response = function(status, headers, body)
  done = done + 1
  if done >= limit then wrk.thread:stop() end
end
