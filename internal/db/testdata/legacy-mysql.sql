/*M!999999\- enable the sandbox mode */ 

/*!40101 SET @OLD_CHARACTER_SET_CLIENT=@@CHARACTER_SET_CLIENT */;
/*!40101 SET @OLD_CHARACTER_SET_RESULTS=@@CHARACTER_SET_RESULTS */;
/*!40101 SET @OLD_COLLATION_CONNECTION=@@COLLATION_CONNECTION */;
/*!40101 SET NAMES utf8mb4 */;
/*!40103 SET @OLD_TIME_ZONE=@@TIME_ZONE */;
/*!40103 SET TIME_ZONE='+00:00' */;
/*!40014 SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, UNIQUE_CHECKS=0 */;
/*!40014 SET @OLD_FOREIGN_KEY_CHECKS=@@FOREIGN_KEY_CHECKS, FOREIGN_KEY_CHECKS=0 */;
/*!40101 SET @OLD_SQL_MODE=@@SQL_MODE, SQL_MODE='NO_AUTO_VALUE_ON_ZERO' */;
/*!40111 SET @OLD_SQL_NOTES=@@SQL_NOTES, SQL_NOTES=0 */;
DROP TABLE IF EXISTS `job_fences`;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `job_fences` (
  `name` varchar(64) NOT NULL,
  `token` bigint(20) NOT NULL,
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
/*!40101 SET character_set_client = @saved_cs_client */;

LOCK TABLES `job_fences` WRITE;
/*!40000 ALTER TABLE `job_fences` DISABLE KEYS */;
/*!40000 ALTER TABLE `job_fences` ENABLE KEYS */;
UNLOCK TABLES;
DROP TABLE IF EXISTS `locks`;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `locks` (
  `token` bigint(20) NOT NULL AUTO_INCREMENT,
  `name` varchar(191) NOT NULL,
  `owner` varchar(64) CHARACTER SET ascii COLLATE ascii_general_ci NOT NULL,
  `expires_at` datetime(6) NOT NULL,
  PRIMARY KEY (`token`),
  UNIQUE KEY `locks_name` (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
/*!40101 SET character_set_client = @saved_cs_client */;

LOCK TABLES `locks` WRITE;
/*!40000 ALTER TABLE `locks` DISABLE KEYS */;
/*!40000 ALTER TABLE `locks` ENABLE KEYS */;
UNLOCK TABLES;
DROP TABLE IF EXISTS `order_events`;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `order_events` (
  `id` bigint(20) NOT NULL AUTO_INCREMENT,
  `order_id` bigint(20) NOT NULL,
  `type` varchar(16) NOT NULL,
  `payload` text NOT NULL,
  `created_at` datetime(6) NOT NULL,
  `published_at` datetime(6) DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `order_events_unpublished` (`published_at`,`id`)
) ENGINE=InnoDB AUTO_INCREMENT=11 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
/*!40101 SET character_set_client = @saved_cs_client */;

LOCK TABLES `order_events` WRITE;
/*!40000 ALTER TABLE `order_events` DISABLE KEYS */;
INSERT INTO `order_events` VALUES
(1,1,'placed','{\"id\":1,\"sku\":\"phone\",\"user_id\":\"alice\",\"quantity\":1,\"status\":\"pending\",\"created_at\":\"2026-11-27T05:16:25.429804Z\",\"expires_at\":\"2026-11-27T05:31:25.430513Z\",\"items\":[{\"sku\":\"phone\",\"quantity\":1}]}','2026-11-27 05:16:25.430779','2026-11-27 05:16:25.459716'),
(2,2,'placed','{\"id\":2,\"sku\":\"phone\",\"user_id\":\"bob\",\"quantity\":2,\"status\":\"pending\",\"created_at\":\"2026-11-27T05:16:25.43921Z\",\"expires_at\":\"2026-11-27T05:31:25.439778Z\",\"items\":[{\"sku\":\"phone\",\"quantity\":2}]}','2026-11-27 05:16:25.440338','2026-11-27 05:16:25.459716'),
(3,3,'placed','{\"id\":3,\"user_id\":\"carol\",\"status\":\"pending\",\"created_at\":\"2026-11-27T05:16:25.448298Z\",\"expires_at\":\"2026-11-27T05:31:25.449364Z\",\"items\":[{\"sku\":\"hat\",\"quantity\":2},{\"sku\":\"shoes\",\"quantity\":1}]}','2026-11-27 05:16:25.449763','2026-11-27 05:16:25.459716'),
(4,5,'placed','{\"id\":5,\"user_id\":\"dave\",\"status\":\"pending\",\"created_at\":\"2026-11-27T05:16:25.458351Z\",\"expires_at\":\"2026-11-27T05:31:25.460946Z\",\"items\":[{\"sku\":\"hat\",\"quantity\":1},{\"sku\":\"phone\",\"quantity\":1},{\"sku\":\"shoes\",\"quantity\":3}]}','2026-11-27 05:16:25.461269','2026-11-27 05:16:25.725055'),
(5,8,'placed','{\"id\":8,\"sku\":\"hat\",\"user_id\":\"erin\",\"quantity\":1,\"status\":\"pending\",\"created_at\":\"2026-11-27T05:16:25.469004Z\",\"expires_at\":\"2026-11-27T05:31:25.469463Z\",\"items\":[{\"sku\":\"hat\",\"quantity\":1}]}','2026-11-27 05:16:25.469682','2026-11-27 05:16:25.725055'),
(6,1,'paid','{\"id\":1,\"sku\":\"phone\",\"user_id\":\"alice\",\"quantity\":1,\"status\":\"paid\",\"created_at\":\"2026-11-27T05:16:25.429804Z\",\"expires_at\":\"2026-11-27T05:31:25.430513Z\",\"paid_at\":\"2026-11-27T05:16:25.484277Z\",\"payment_id\":\"pay-1\",\"items\":[{\"sku\":\"phone\",\"quantity\":1}]}','2026-11-27 05:16:25.484885','2026-11-27 05:16:25.725055'),
(7,3,'paid','{\"id\":3,\"user_id\":\"carol\",\"status\":\"paid\",\"created_at\":\"2026-11-27T05:16:25.448298Z\",\"expires_at\":\"2026-11-27T05:31:25.449364Z\",\"paid_at\":\"2026-11-27T05:16:25.4978Z\",\"payment_id\":\"pay-3\",\"items\":[{\"sku\":\"hat\",\"quantity\":2},{\"sku\":\"shoes\",\"quantity\":1}]}','2026-11-27 05:16:25.498951','2026-11-27 05:16:25.725055'),
(8,1,'refunded','{\"id\":1,\"sku\":\"phone\",\"user_id\":\"alice\",\"quantity\":1,\"status\":\"refunded\",\"created_at\":\"2026-11-27T05:16:25.429804Z\",\"expires_at\":\"2026-11-27T05:31:25.430513Z\",\"paid_at\":\"2026-11-27T05:16:25.484277Z\",\"payment_id\":\"pay-1\",\"refunded_at\":\"2026-11-27T05:16:25.507214Z\",\"items\":[{\"sku\":\"phone\",\"quantity\":1}]}','2026-11-27 05:16:25.507407','2026-11-27 05:16:25.725055'),
(9,2,'cancelled','{\"id\":2,\"sku\":\"phone\",\"user_id\":\"bob\",\"quantity\":2,\"status\":\"cancelled\",\"created_at\":\"2026-11-27T05:16:25.43921Z\",\"expires_at\":\"2026-11-27T05:31:25.439778Z\",\"cancelled_at\":\"2026-11-27T05:16:25.515378Z\",\"items\":[{\"sku\":\"phone\",\"quantity\":2}]}','2026-11-27 05:16:25.515562','2026-11-27 05:16:25.725055'),
(10,2,'cancelled','{\"id\":2,\"sku\":\"phone\",\"user_id\":\"bob\",\"quantity\":2,\"status\":\"cancelled\",\"created_at\":\"2026-11-27T05:16:25.43921Z\",\"expires_at\":\"2026-11-27T05:31:25.439778Z\",\"cancelled_at\":\"2026-11-27T05:16:25.515378Z\",\"items\":[{\"sku\":\"phone\",\"quantity\":2}]}','2020-01-01 00:00:00.000000',NULL);
/*!40000 ALTER TABLE `order_events` ENABLE KEYS */;
UNLOCK TABLES;
DROP TABLE IF EXISTS `orders`;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `orders` (
  `id` bigint(20) NOT NULL AUTO_INCREMENT,
  `sku` varchar(64) NOT NULL,
  `user_id` varchar(64) NOT NULL,
  `quantity` int(11) NOT NULL,
  `status` varchar(16) NOT NULL,
  `idempotency_key` varchar(255) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL,
  `created_at` datetime(6) NOT NULL,
  `refunded_at` datetime(6) DEFAULT NULL,
  `refund_key` varchar(255) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL,
  `expires_at` datetime(6) DEFAULT NULL,
  `paid_at` datetime(6) DEFAULT NULL,
  `payment_id` varchar(64) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL,
  `cancelled_at` datetime(6) DEFAULT NULL,
  `cancel_key` varchar(255) CHARACTER SET ascii COLLATE ascii_bin DEFAULT NULL,
  `cart_id` bigint(20) DEFAULT NULL,
  `line_count` smallint(6) NOT NULL DEFAULT 1,
  PRIMARY KEY (`id`),
  UNIQUE KEY `orders_user_key` (`user_id`,`idempotency_key`),
  KEY `orders_user_sku` (`user_id`,`sku`,`id`),
  KEY `orders_sku` (`sku`),
  KEY `orders_expiry` (`status`,`expires_at`),
  KEY `orders_cart` (`cart_id`)
) ENGINE=InnoDB AUTO_INCREMENT=9 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
/*!40101 SET character_set_client = @saved_cs_client */;

LOCK TABLES `orders` WRITE;
/*!40000 ALTER TABLE `orders` DISABLE KEYS */;
INSERT INTO `orders` VALUES
(1,'phone','alice',1,'refunded','k1','2026-11-27 05:16:25.429804','2026-11-27 05:16:25.507214','r1','2026-11-27 05:31:25.430513','2026-11-27 05:16:25.484277','pay-1',NULL,NULL,NULL,1),
(2,'phone','bob',2,'cancelled','k2','2026-11-27 05:16:25.439210',NULL,NULL,'2026-11-27 05:31:25.439778',NULL,NULL,'2026-11-27 05:16:25.515378','c2',NULL,1),
(3,'hat','carol',2,'paid','k3','2026-11-27 05:16:25.448298',NULL,NULL,'2026-11-27 05:31:25.449364','2026-11-27 05:16:25.497800','pay-3',NULL,NULL,NULL,2),
(4,'shoes','carol',1,'paid',NULL,'2026-11-27 05:16:25.448298',NULL,NULL,'2026-11-27 05:31:25.449364','2026-11-27 05:16:25.497800','pay-3',NULL,NULL,3,0),
(5,'hat','dave',1,'pending','k4','2026-11-27 05:16:25.458351',NULL,NULL,'2026-11-27 05:31:25.460946',NULL,NULL,NULL,NULL,NULL,3),
(6,'phone','dave',1,'pending',NULL,'2026-11-27 05:16:25.458351',NULL,NULL,'2026-11-27 05:31:25.460946',NULL,NULL,NULL,NULL,5,0),
(7,'shoes','dave',3,'pending',NULL,'2026-11-27 05:16:25.458351',NULL,NULL,'2026-11-27 05:31:25.460946',NULL,NULL,NULL,NULL,5,0),
(8,'hat','erin',1,'pending','k5','2026-11-27 05:16:25.469004',NULL,NULL,'2026-11-27 05:31:25.469463',NULL,NULL,NULL,NULL,NULL,1);
/*!40000 ALTER TABLE `orders` ENABLE KEYS */;
UNLOCK TABLES;
DROP TABLE IF EXISTS `payments`;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `payments` (
  `payment_id` varchar(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  `order_id` bigint(20) NOT NULL,
  `status` varchar(16) NOT NULL,
  `reason` varchar(32) DEFAULT NULL,
  `created_at` datetime(6) NOT NULL,
  PRIMARY KEY (`payment_id`),
  KEY `payments_order` (`order_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
/*!40101 SET character_set_client = @saved_cs_client */;

LOCK TABLES `payments` WRITE;
/*!40000 ALTER TABLE `payments` DISABLE KEYS */;
INSERT INTO `payments` VALUES
('pay-1',1,'paid',NULL,'2026-11-27 05:16:25.484277'),
('pay-3',3,'paid',NULL,'2026-11-27 05:16:25.497800');
/*!40000 ALTER TABLE `payments` ENABLE KEYS */;
UNLOCK TABLES;
DROP TABLE IF EXISTS `stock_epochs`;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `stock_epochs` (
  `sku` varchar(64) NOT NULL,
  `epoch` bigint(20) NOT NULL,
  PRIMARY KEY (`sku`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
/*!40101 SET character_set_client = @saved_cs_client */;

LOCK TABLES `stock_epochs` WRITE;
/*!40000 ALTER TABLE `stock_epochs` DISABLE KEYS */;
/*!40000 ALTER TABLE `stock_epochs` ENABLE KEYS */;
UNLOCK TABLES;
DROP TABLE IF EXISTS `stock_items`;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `stock_items` (
  `sku` varchar(64) NOT NULL,
  `initial` int(11) NOT NULL,
  `available` int(11) NOT NULL,
  `version` bigint(20) NOT NULL DEFAULT 0,
  `fence` bigint(20) NOT NULL DEFAULT 0,
  `updated_at` datetime(6) NOT NULL,
  PRIMARY KEY (`sku`),
  CONSTRAINT `stock_items_available_nonnegative` CHECK (`available` >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
/*!40101 SET character_set_client = @saved_cs_client */;

LOCK TABLES `stock_items` WRITE;
/*!40000 ALTER TABLE `stock_items` DISABLE KEYS */;
INSERT INTO `stock_items` VALUES
('hat',50,46,3,0,'2026-11-27 05:16:25.469290'),
('phone',100,99,5,0,'2026-11-27 05:16:25.515188'),
('shoes',20,16,2,0,'2026-11-27 05:16:25.460866');
/*!40000 ALTER TABLE `stock_items` ENABLE KEYS */;
UNLOCK TABLES;
DROP TABLE IF EXISTS `user_purchases`;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `user_purchases` (
  `user_id` varchar(64) NOT NULL,
  `sku` varchar(64) NOT NULL,
  `units` int(11) NOT NULL,
  PRIMARY KEY (`user_id`,`sku`),
  KEY `user_purchases_sku` (`sku`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
/*!40101 SET character_set_client = @saved_cs_client */;

LOCK TABLES `user_purchases` WRITE;
/*!40000 ALTER TABLE `user_purchases` DISABLE KEYS */;
/*!40000 ALTER TABLE `user_purchases` ENABLE KEYS */;
UNLOCK TABLES;
/*!40103 SET TIME_ZONE=@OLD_TIME_ZONE */;

/*!40101 SET SQL_MODE=@OLD_SQL_MODE */;
/*!40014 SET FOREIGN_KEY_CHECKS=@OLD_FOREIGN_KEY_CHECKS */;
/*!40014 SET UNIQUE_CHECKS=@OLD_UNIQUE_CHECKS */;
/*!40101 SET CHARACTER_SET_CLIENT=@OLD_CHARACTER_SET_CLIENT */;
/*!40101 SET CHARACTER_SET_RESULTS=@OLD_CHARACTER_SET_RESULTS */;
/*!40101 SET COLLATION_CONNECTION=@OLD_COLLATION_CONNECTION */;
/*!40111 SET SQL_NOTES=@OLD_SQL_NOTES */;

