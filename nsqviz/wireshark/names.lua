-- ---------------------------------------------------------------------------------
-- nsqd's naming rule for topics and channels, which NSQ V2 and the lookupd V1
-- protocol share: the generator puts it into those two dissectors only.
-- ---------------------------------------------------------------------------------

-- is name a valid topic or channel name? 1 to max_len bytes of [.a-zA-Z0-9_-], the
-- optional suffix (#ephemeral) not on its own
local function valid_name(name, suffix, max_len)
  local base = name
  if #suffix > 0 and name:sub(-#suffix) == suffix then
    base = name:sub(1, -#suffix - 1)
  end
  return #name >= 1 and #name <= max_len and #base >= 1
         and base:find("^[%.a-zA-Z0-9_%-]+$") ~= nil
end
