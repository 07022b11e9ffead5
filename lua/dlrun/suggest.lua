-- The closest known name to a misspelt one, by CPython's rule for
-- "Did you mean: ...?" (Python/suggestions.c): a Levenshtein distance where
-- an insertion, deletion or substitution costs 2 and a change of case alone
-- costs 1, after dropping a common prefix and suffix; a candidate counts when
-- its distance is at most (len(name) + len(candidate) + 3) * 2 // 6, and the
-- first nearest one in sorted order wins. Names longer than 40 bytes (after
-- the trimming) and lists of 750 or more candidates suggest nothing.
local MOVE_COST, CASE_COST = 2, 1
local MAX_STRING_SIZE, MAX_CANDIDATES = 40, 750

local byte, lower = string.byte, string.lower

local function substitution_cost(a, b)
  if a == b then return 0 end
  if a % 32 == b % 32 and lower(string.char(a)) == lower(string.char(b)) then
    return CASE_COST
  end
  return MOVE_COST
end

-- distance(a, b), or max_cost + 1 as soon as it is known to exceed max_cost.
local function distance(a, b, max_cost)
  local first, a_end, b_end = 1, #a, #b
  while first <= a_end and first <= b_end and byte(a, first) == byte(b, first) do
    first = first + 1
  end
  while a_end >= first and b_end >= first and byte(a, a_end) == byte(b, b_end) do
    a_end, b_end = a_end - 1, b_end - 1
  end
  a, b = a:sub(first, a_end), b:sub(first, b_end)
  if #a == 0 or #b == 0 then return (#a + #b) * MOVE_COST end
  if #a > MAX_STRING_SIZE or #b > MAX_STRING_SIZE then return max_cost + 1 end
  if #b < #a then a, b = b, a end
  if (#b - #a) * MOVE_COST > max_cost then return max_cost + 1 end
  -- One row of the matrix, updated in place: row[i] is the cost from the
  -- part of b seen so far to a's first i bytes.
  local row = {}
  for i = 1, #a do row[i] = i * MOVE_COST end
  local result = 0
  for j = 1, #b do
    local code = byte(b, j)
    local diagonal = (j - 1) * MOVE_COST
    result = diagonal
    local minimum = math.huge
    for i = 1, #a do
      local substitute = diagonal + substitution_cost(code, byte(a, i))
      diagonal = row[i]
      result = math.min(math.min(result, diagonal) + MOVE_COST, substitute)
      row[i] = result
      if result < minimum then minimum = result end
    end
    if minimum > max_cost then return max_cost + 1 end
  end
  return result
end

-- The candidate to suggest for `name`, or nil.
return function(name, candidates)
  if #candidates >= MAX_CANDIDATES then return nil end
  local sorted = {}
  for i, c in ipairs(candidates) do sorted[i] = c end
  table.sort(sorted)
  local best, best_distance
  for _, item in ipairs(sorted) do
    if item ~= name then
      local max_distance = (#name + #item + 3) * MOVE_COST // 6
      if best_distance then max_distance = math.min(max_distance, best_distance - 1) end
      local d = distance(name, item, max_distance)
      if d <= max_distance and (not best or d < best_distance) then
        best, best_distance = item, d
      end
    end
  end
  return best
end
