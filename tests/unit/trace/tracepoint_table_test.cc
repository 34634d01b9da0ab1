// TracepointTable: the engine's indexes by location, number and address stay
// consistent through adds and erases, and keep definition order.
#include <gtest/gtest.h>

#include "trace/tracepoint.h"
#include "trace/tracepoint_table.h"

namespace gdbtrace {
namespace {

struct Entry {
  Tracepoint tp;
};

Entry* add(TracepointTable<Entry>& table, uint32_t number, uint64_t address) {
  auto e = std::make_unique<Entry>();
  e->tp.number = number;
  e->tp.address = address;
  return table.add(std::move(e));
}

TEST(TracepointTable, IndexesFollowAddsAndErases) {
  TracepointTable<Entry> table;
  Entry* a = add(table, 1, 0x1000);
  Entry* b = add(table, 1, 0x2000); // a second location of number 1
  Entry* c = add(table, 2, 0x1000); // another number at a's address
  EXPECT_EQ(table.find(1, 0x2000), b);
  EXPECT_EQ(table.find(2, 0x2000), nullptr);
  EXPECT_EQ(table.first_with_number(1), a);
  EXPECT_EQ(table.with_number(1), (std::vector<Entry*>{a, b}));
  EXPECT_EQ(table.at_address(0x1000), (std::vector<Entry*>{a, c}));
  EXPECT_TRUE(table.at_address(0x3000).empty());

  table.erase(a);
  EXPECT_EQ(table.find(1, 0x1000), nullptr);
  EXPECT_EQ(table.first_with_number(1), b);
  EXPECT_EQ(table.at_address(0x1000), (std::vector<Entry*>{c}));
  std::vector<Entry*> order;
  for (auto& e : table)
    order.push_back(e.get());
  EXPECT_EQ(order, (std::vector<Entry*>{b, c}));

  table.clear();
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.first_with_number(2), nullptr);
  EXPECT_TRUE(table.at_address(0x1000).empty());
}

} // namespace
} // namespace gdbtrace
